#include "ssh_test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace fs = std::filesystem;

namespace hpc::test {

std::string cluster_dir() {
  if (const char* dir = std::getenv("HPC_TESTCLUSTER_DIR"); dir && *dir) return dir;
  return "/tmp/hpclaunch-testcluster";
}

int ssh_port() {
  std::ifstream in(cluster_dir() + "/cluster.env");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("ssh_port=", 0) == 0) return std::stoi(line.substr(9));
  throw std::runtime_error("no ssh_port in " + cluster_dir() +
                           "/cluster.env: is the test "
                           "cluster up (scripts/testcluster.sh up)?");
}

std::string login_user() {
  const passwd* pw = getpwuid(geteuid());
  if (!pw) throw std::runtime_error("no passwd entry for uid " + std::to_string(geteuid()));
  return pw->pw_name;
}

std::string host_public_key() {
  std::string line = read_local(cluster_dir() + "/ssh/ssh_host_ed25519_key.pub");
  // "ssh-ed25519 AAAA... comment" -> the first two words
  size_t space = line.find(' ');
  size_t end = line.find_first_of(" \n", space + 1);
  return line.substr(0, end);
}

SshHostOptions login_options() {
  SshHostOptions o;
  o.host = "testlogin";
  o.config_file = cluster_dir() + "/ssh/config";
  o.connect_timeout = std::chrono::seconds(5);
  o.reconnect_delay = std::chrono::milliseconds(100);
  return o;
}

std::string scratch_dir(const std::string& name) {
  fs::path dir = fs::path(cluster_dir()) / "ssh-tests" / (name + "-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string read_local(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_local(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

bool local_exists(const std::string& path) { return fs::exists(path); }

namespace {

sockaddr_in loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

int bound_socket(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in a = loopback(port);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    throw std::runtime_error("cannot bind 127.0.0.1:" + std::to_string(port));
  }
  return fd;
}

int port_of(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

}  // namespace

bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

int closed_port() {
  int fd = bound_socket(0);
  int port = port_of(fd);
  close(fd);
  return port;
}

TcpRelay::TcpRelay(int target) : target_(target) {
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe");
  listen_now();
  thread_ = std::thread([this] { loop(); });
}

TcpRelay::~TcpRelay() {
  stop_ = true;
  char c = 0;
  (void)!write(wake_[1], &c, 1);
  thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
  close(wake_[0]);
  close(wake_[1]);
}

void TcpRelay::listen_now() {
  listen_fd_ = bound_socket(port_);
  port_ = port_of(listen_fd_);
  listen(listen_fd_, 16);
}

void TcpRelay::request(bool cut, bool refuse, bool freeze) {
  cut_ = cut;
  refuse_ = refuse;
  freeze_ = freeze;
  int want = ++requested_;
  char c = 0;
  (void)!write(wake_[1], &c, 1);
  while (applied_ < want) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void TcpRelay::cut() { request(true, refuse_); }
void TcpRelay::refuse() { request(true, true); }
void TcpRelay::accept_again() { request(false, false); }
void TcpRelay::freeze() { request(false, refuse_, true); }

void TcpRelay::loop() {
  std::vector<std::pair<int, int>> links;   // (client, server)
  std::vector<std::pair<int, int>> frozen;  // open, never read or written again
  auto close_links = [&] {
    for (auto* list : {&links, &frozen}) {
      for (auto& [a, b] : *list) {
        close(a);
        close(b);
      }
      list->clear();
    }
  };
  while (!stop_) {
    if (applied_ < requested_) {
      if (cut_) close_links();
      if (freeze_) {
        frozen.insert(frozen.end(), links.begin(), links.end());
        links.clear();
      }
      applied_ = requested_.load();
    }
    std::vector<pollfd> p;
    p.push_back({wake_[0], POLLIN, 0});
    if (listen_fd_ >= 0) p.push_back({listen_fd_, POLLIN, 0});
    const size_t first_link = p.size(), polled_links = links.size();
    for (auto& [a, b] : links) {
      p.push_back({a, POLLIN, 0});
      p.push_back({b, POLLIN, 0});
    }
    if (poll(p.data(), p.size(), 1000) <= 0) continue;
    if (p[0].revents) {
      char buf[64];
      while (read(wake_[0], buf, sizeof buf) > 0) {}
    }
    if (listen_fd_ >= 0 && p[1].revents) {
      int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0 && refuse_) {
        linger reset{1, 0};  // close with RST, as a port nobody listens on answers
        setsockopt(client, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
        close(client);
        ++refused_;
      } else if (client >= 0) {
        int server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a = loopback(target_);
        if (::connect(server, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
          links.emplace_back(client, server);
          ++accepted_;
        } else {
          close(client);
          close(server);
        }
      }
    }
    std::vector<size_t> dead;
    for (size_t i = 0; i < polled_links; ++i) {  // not the one accepted just now
      for (int side = 0; side < 2; ++side) {
        const pollfd& q = p[first_link + 2 * i + side];
        if (!q.revents) continue;
        int from = side ? links[i].second : links[i].first;
        int to = side ? links[i].first : links[i].second;
        char buf[65536];
        ssize_t n = read(from, buf, sizeof buf);
        bool ok = n > 0;
        for (ssize_t off = 0; ok && off < n;) {
          ssize_t w = write(to, buf + off, static_cast<size_t>(n - off));
          if (w <= 0)
            ok = false;
          else
            off += w;
        }
        if (!ok) {
          dead.push_back(i);
          break;
        }
      }
    }
    for (auto it = dead.rbegin(); it != dead.rend(); ++it) {
      close(links[*it].first);
      close(links[*it].second);
      links.erase(links.begin() + static_cast<long>(*it));
    }
  }
  close_links();
}

}  // namespace hpc::test
