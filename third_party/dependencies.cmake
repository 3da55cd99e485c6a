# Finds what the build uses. Nothing here is copied code: torch comes from the installed wheel,
# spdlog and GoogleTest from Debian's packages (libspdlog-dev, libgtest-dev).

find_package(Threads REQUIRED)
find_package(Torch REQUIRED)
find_package(spdlog CONFIG REQUIRED)

# torch_python is not part of TORCH_LIBRARIES; the bindings need it.
find_library(TORCH_PYTHON_LIBRARY torch_python PATHS "${TORCH_INSTALL_PREFIX}/lib" NO_DEFAULT_PATH)

if(TORCHTPU_BUILD_PYTHON)
  find_package(Python COMPONENTS Interpreter Development.Module REQUIRED)
  if(NOT TORCHTPU_PYTHON_EXT_SUFFIX)
    execute_process(
      COMMAND ${Python_EXECUTABLE} -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))"
      OUTPUT_VARIABLE TORCHTPU_PYTHON_EXT_SUFFIX OUTPUT_STRIP_TRAILING_WHITESPACE)
  endif()
endif()

if(TORCHTPU_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
