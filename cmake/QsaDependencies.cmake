# All third-party dependencies come from Debian packages through find_package.
# scripts/setup.sh installs them; a missing one stops configure with the
# package name to install.
macro(qsa_require pkg debian)
  find_package(${pkg} ${ARGN})
  if(NOT ${pkg}_FOUND)
    message(FATAL_ERROR "qsa needs ${pkg}: run scripts/setup.sh or apt-get install ${debian}")
  endif()
endmacro()

qsa_require(Eigen3 libeigen3-dev 3.3 NO_MODULE)
qsa_require(fmt libfmt-dev)
qsa_require(CLI11 libcli11-dev)
qsa_require(HDF5 libhdf5-dev COMPONENTS C CXX)
qsa_require(OpenMP libomp-dev)
if(QSA_BUILD_TESTS)
  qsa_require(GTest libgtest-dev)
endif()
if(QSA_BUILD_BENCHMARKS)
  qsa_require(benchmark libbenchmark-dev)
endif()
