// strata._torch_backend: the process group class for Python. strata/torch.py registers it
// with torch.distributed. The class derives from torch's own class for a backend
// (ProcessGroup in torch 1.x, Backend in 2.x; pybind11 finds torch's registration of it)
// so that torch accepts it where it expects one.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "process_group.hpp"

namespace py = pybind11;

// torch keeps its process groups and stores in c10::intrusive_ptr, and declares that
// holder to pybind11 the same way (torch/csrc/utils/pybind.h).
PYBIND11_DECLARE_HOLDER_TYPE(T, c10::intrusive_ptr<T>, true);

PYBIND11_MODULE(_torch_backend, m) {
  m.doc() = "Strata's torch.distributed process group (use: import strata.torch)";
  py::module_::import("torch._C._distributed_c10d");  // registers the base class with pybind11
  py::class_<strata_torch::ProcessGroupStrata, strata_torch::BackendBase,
             c10::intrusive_ptr<strata_torch::ProcessGroupStrata>>(m, "ProcessGroupStrata")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, std::vector<int64_t> global_ranks) {
             return c10::make_intrusive<strata_torch::ProcessGroupStrata>(store, rank, size, timeout,
                                                                          std::move(global_ranks));
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::arg("global_ranks") = std::vector<int64_t>{}, py::call_guard<py::gil_scoped_release>());
  m.attr("torch_version_built") = py::str(std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR));
}
