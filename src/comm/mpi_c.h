// <mpi.h> without the deprecated C++ bindings, which OpenMPI's header pulls in for C++ callers
// unless told not to (zerodp links only the C library, MPI::MPI_C). Include this, never <mpi.h>.
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
