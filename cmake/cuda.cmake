# CUDA is detected, never required: the CPU path builds and runs without it.
#
# Where the libraries are looked for, in order: the CUDA toolkit's own folders; the folders in
# TS_CUDA_LIB_HINTS / TS_CUDA_INCLUDE_HINTS (environment or cache, ':' or ';' separated); and
# the NVIDIA pip wheels of python3's environment (site-packages/nvidia/*/lib and
# nvidia/*/include: cuDNN, NCCL, cuBLAS, CUPTI as PyTorch installs them). The wheels ship
# only versioned libraries (libcudnn.so.9, libnccl.so.2), so those names are searched too.
set(TS_HAVE_CUDA OFF)
if(NOT TS_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  # CMake 3.25's FindCUDAToolkit (Debian 12's 3.25.1) marks CUDA::nvToolsExt deprecated without
  # checking that it exists, and CUDA 13 ships no nvToolsExt: configure stopped there on a stock
  # Debian 12. It does that only for projects that require CMake >= 3.25, so the search runs as
  # one that requires 3.24 (the variable only gates such warnings; policies stay as set).
  set(_ts_min_version ${CMAKE_MINIMUM_REQUIRED_VERSION})
  if(CMAKE_VERSION VERSION_LESS 3.26)
    set(CMAKE_MINIMUM_REQUIRED_VERSION 3.24)
  endif()
  find_package(CUDAToolkit QUIET)
  set(CMAKE_MINIMUM_REQUIRED_VERSION ${_ts_min_version})

  # Read at every configure (the environment) and as -D variables.
  string(REPLACE ":" ";" _ts_user_lib_hints "$ENV{TS_CUDA_LIB_HINTS};${TS_CUDA_LIB_HINTS}")
  string(REPLACE ":" ";" _ts_user_inc_hints "$ENV{TS_CUDA_INCLUDE_HINTS};${TS_CUDA_INCLUDE_HINTS}")

  set(_ts_wheel_lib_hints "")
  set(_ts_wheel_inc_hints "")
  find_program(TS_PYTHON3 NAMES python3)
  if(TS_PYTHON3)
    execute_process(
      COMMAND "${TS_PYTHON3}" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"
      OUTPUT_VARIABLE _ts_purelib OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE _ts_py_rc ERROR_QUIET TIMEOUT 30)
    if(_ts_py_rc EQUAL 0 AND IS_DIRECTORY "${_ts_purelib}/nvidia")
      file(GLOB _ts_wheel_lib_hints LIST_DIRECTORIES true "${_ts_purelib}/nvidia/*/lib")
      file(GLOB _ts_wheel_inc_hints LIST_DIRECTORIES true "${_ts_purelib}/nvidia/*/include")
      if(_ts_wheel_lib_hints)
        message(STATUS "trainscope: NVIDIA wheels found under ${_ts_purelib}/nvidia")
      endif()
    endif()
  endif()

  set(_ts_cuda_hints ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_TARGET_DIR}/lib64 ${_ts_user_lib_hints}
      ${_ts_wheel_lib_hints})
  set(_ts_cuda_inc_hints ${CUDAToolkit_INCLUDE_DIRS} ${_ts_user_inc_hints} ${_ts_wheel_inc_hints})
  find_library(TS_CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 HINTS ${_ts_cuda_hints})
  find_path(TS_CUDNN_INCLUDE_DIR cudnn.h HINTS ${_ts_cuda_inc_hints})
  find_library(TS_NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_ts_cuda_hints})
  find_path(TS_NCCL_INCLUDE_DIR nccl.h HINTS ${_ts_cuda_inc_hints})

  # A toolkit without CUPTI (it lives in extras/ and in its own wheel): take the wheel's.
  if(CUDAToolkit_FOUND AND NOT TARGET CUDA::cupti)
    find_library(TS_CUPTI_LIBRARY NAMES cupti libcupti.so.13 HINTS ${_ts_cuda_hints})
    find_path(TS_CUPTI_INCLUDE_DIR cupti.h HINTS ${_ts_cuda_inc_hints} ${CUDAToolkit_TARGET_DIR}/extras/CUPTI/include)
    if(TS_CUPTI_LIBRARY AND TS_CUPTI_INCLUDE_DIR)
      add_library(CUDA::cupti SHARED IMPORTED GLOBAL)
      set_target_properties(CUDA::cupti PROPERTIES IMPORTED_LOCATION "${TS_CUPTI_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${TS_CUPTI_INCLUDE_DIR}")
    endif()
  endif()

  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND AND TARGET CUDA::cupti AND TS_CUDNN_LIBRARY
     AND TS_CUDNN_INCLUDE_DIR AND TS_NCCL_LIBRARY AND TS_NCCL_INCLUDE_DIR)
    set(TS_HAVE_CUDA ON)
  elseif(TS_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TS_CUDA=ON but not all of nvcc, CUDA toolkit, CUPTI, cuDNN and NCCL were found "
      "(nvcc: ${CMAKE_CUDA_COMPILER}, toolkit: ${CUDAToolkit_FOUND}, cuDNN: ${TS_CUDNN_LIBRARY} / "
      "${TS_CUDNN_INCLUDE_DIR}, NCCL: ${TS_NCCL_LIBRARY} / ${TS_NCCL_INCLUDE_DIR}). "
      "Point TS_CUDA_LIB_HINTS / TS_CUDA_INCLUDE_HINTS at the folders that hold them.")
  endif()
endif()
if(TS_HAVE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)   # Hopper, the lent GPU machines
  endif()
  # One CUDA runtime in the process: the shared one that CUDA::cudart and the libraries use.
  # (The static default would give .cu objects a second runtime, whose streams the first
  # does not know.)
  if(NOT DEFINED CMAKE_CUDA_RUNTIME_LIBRARY)
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  endif()
  enable_language(CUDA)
  message(STATUS "trainscope: CUDA parts enabled (toolkit ${CUDAToolkit_VERSION}, cuDNN ${TS_CUDNN_LIBRARY}, archs ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "trainscope: CUDA parts disabled (TS_CUDA=${TS_CUDA})")
endif()
