# The LibTorch 2.x build (HPC_TORCH2=ON, preset torch2-cuda): find the torch wheel's LibTorch
# before find_package(Torch), and everything a wheel's LibTorch lacks or needs. docs/libtorch2.md.
if(NOT HPC_TORCH2_PREFIX)
  execute_process(COMMAND "${PROJECT_SOURCE_DIR}/scripts/install-deps.sh" --torch2-prefix
    OUTPUT_VARIABLE _hpc_torch2_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_VARIABLE _hpc_torch2_error ERROR_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _hpc_torch2_rc)
  if(NOT _hpc_torch2_rc EQUAL 0 OR NOT _hpc_torch2_prefix)
    message(FATAL_ERROR "HPC_TORCH2: no LibTorch 2.x: ${_hpc_torch2_error} "
                        "(or set HPC_TORCH2_PREFIX to a TorchConfig folder)")
  endif()
  set(HPC_TORCH2_PREFIX "${_hpc_torch2_prefix}" CACHE PATH
    "TorchConfig folder of a LibTorch 2.x (empty: the one of scripts/install-deps.sh --torch2)"
    FORCE)
endif()
# <torch>/share/cmake: the wheel's root is two folders up. Both go first on the prefix path:
# TorchConfig looks for libtorch.so and libc10.so in the default places before its own lib/, and
# would take Debian's 1.13 /usr/lib/x86_64-linux-gnu/libtorch.so otherwise.
get_filename_component(HPC_TORCH2_ROOT "${HPC_TORCH2_PREFIX}/../.." ABSOLUTE)
list(PREPEND CMAKE_PREFIX_PATH "${HPC_TORCH2_ROOT}" "${HPC_TORCH2_PREFIX}")
foreach(_hpc_lib torch c10)
  string(TOUPPER "${_hpc_lib}" _hpc_var)
  if(_hpc_lib STREQUAL "c10")
    set(_hpc_var c10)
  endif()
  find_library(${_hpc_var}_LIBRARY ${_hpc_lib} PATHS "${HPC_TORCH2_ROOT}/lib" NO_DEFAULT_PATH)
endforeach()

# The CUDA architectures only matter to .cu files (hpctrain has none); naming them spares
# Caffe2's cuda.cmake a GPU probe that fails on a machine without one.
if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(ENV{TORCH_CUDA_ARCH_LIST} "8.0;9.0")
endif()

# The PyTorch reference of the parity test runs on the same wheel: the Python beside it (a venv's
# bin/python for <venv>/lib/pythonX.Y/site-packages/torch).
get_filename_component(_hpc_venv "${HPC_TORCH2_ROOT}/../../../.." ABSOLUTE)
set(_hpc_python "")
if(EXISTS "${_hpc_venv}/bin/python")
  set(_hpc_python "${_hpc_venv}/bin/python")
endif()
set(HPC_TORCH2_PYTHON "${_hpc_python}" CACHE FILEPATH
  "Python whose torch is the LibTorch 2.x of this build (the parity test's reference)")
if(NOT HPC_TORCH2_PYTHON)
  message(WARNING "HPC_TORCH2: no Python beside ${HPC_TORCH2_ROOT}: set HPC_TORCH2_PYTHON, or the "
                  "parity test is not registered")
endif()
