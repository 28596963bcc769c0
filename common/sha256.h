// SHA-256, for the spec hash printed in every script's header: `sha256sum spec.json` of the
// resolved spec that `hpclaunch render --spec-out` writes gives the same digest.
#pragma once

#include <string>
#include <string_view>

namespace hpc {

std::string sha256_hex(std::string_view data);

}  // namespace hpc
