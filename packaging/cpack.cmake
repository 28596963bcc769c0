# The .deb packages (cpack -G DEB in the build directory; docs/install.md):
#   hpclaunch   the launcher: binary, presets, templates, man page, completion, docs
#   hpctrain    the trainer (when built): binary and man page; depends on the LibTorch it was
#               linked against (Debian's libtorch1.13), never bundles it
# Dependencies come from dpkg-shlibdeps (the shared libraries the binaries link). The Lmod
# modulefile is not packaged: a .deb puts hpclaunch on the system's PATH already.
set(CPACK_PACKAGE_NAME hpclaunch)
set(CPACK_PACKAGE_VENDOR "hpclaunch")
set(CPACK_PACKAGE_CONTACT "hpclaunch maintainers <hpclaunch@example.org>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "declarative presets and cluster profiles -> reviewed sbatch scripts")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/LICENSE")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Install into the staging folder through DESTDIR with the prefix /usr, so that install(CODE)
# sees the prefix the package has (the zsh completion's folder depends on it).
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL launcher)
if(TARGET hpctrain)
  list(APPEND CPACK_COMPONENTS_ALL trainer)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)

set(CPACK_DEBIAN_LAUNCHER_PACKAGE_NAME hpclaunch)
set(CPACK_COMPONENT_LAUNCHER_DESCRIPTION
  "Slurm job launcher for distributed training\n hpclaunch turns shape presets and cluster profiles into reviewable sbatch scripts,\n submits them (sbatch here, over SSH, or without Slurm) and follows their logs.")
# validate runs bash -n and shellcheck; run/submit need Slurm's client here or over SSH.
set(CPACK_DEBIAN_LAUNCHER_PACKAGE_RECOMMENDS "shellcheck, slurm-client")
set(CPACK_DEBIAN_LAUNCHER_PACKAGE_SUGGESTS "hpctrain, gnuplot")

set(CPACK_DEBIAN_TRAINER_PACKAGE_NAME hpctrain)
set(CPACK_COMPONENT_TRAINER_DESCRIPTION
  "GPT-2 training in C++ with LibTorch (DDP, FSDP, ZeRO)\n hpctrain is the program hpclaunch's batch scripts start by default.")
set(CPACK_DEBIAN_TRAINER_PACKAGE_SUGGESTS "hpclaunch")

include(CPack)
