// The device kernels on the emulated backend: each launch is one stream task
// (Execution::host_task) that runs the functors as loops with one lane per row, and the
// matrix products with the OpenBLAS the host kernels use, over the task's views of device
// memory. The arithmetic and its order are the host kernels', so the emulated backend
// gives the host's results (docs/training.md, "Devices").
#include <cblas.h>

#include <type_traits>
#include <vector>

#include "device/choose.hpp"
#include "device/functor_kernels.hpp"
#include "errors.hpp"

namespace strata::train {
namespace {

class EmulatedLaunch {
 public:
  explicit EmulatedLaunch(const OnDevice& d) : d_(d) {}

  template <typename F>
  void rows(int n, const F& f) const {
    if (n <= 0) return;
    run(f, [n](const F& g) {
      const dk::OneLane one;
      for (int r = 0; r < n; ++r) g(r, one);
    });
  }

  template <typename F>
  void elements(size_t n, const F& f) const {
    if (n == 0) return;
    run(f, [n](const F& g) {
      for (size_t i = 0; i < n; ++i) g(i);
    });
  }

  void gemm(const Gemm& g) const {
    check_inside("A", g.A, g.span_a());
    check_inside("B", g.B, g.span_b());
    check_inside("C", g.C, g.span_c());
    const void* ptrs[] = {g.A, g.B, g.C};
    d_.backend().execution().host_task(d_.stream(), ptrs, 3, [g](void* const* views) {
      const auto* a = static_cast<const float*>(views[0]);
      const auto* b = static_cast<const float*>(views[1]);
      auto* c = static_cast<float*>(views[2]);
      for (int i = 0; i < g.batch; ++i)
        cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans, g.M,
                    g.N, g.K, g.alpha, a + i * g.stride_a, g.lda, b + i * g.stride_b, g.ldb, g.beta,
                    c + i * g.stride_c, g.ldc);
    });
  }

  // One partial sum: the host kernel's order.
  size_t reduction_rows(size_t) const { return 1; }

 private:
  // A task running body(f') where f' is f with its pointers replaced by the task's views.
  template <typename F, typename Body>
  void run(const F& f, Body body) const {
    F probe = f;
    std::vector<const void*> ptrs;
    probe.pointers([&](auto*& p) { ptrs.push_back(p); });
    d_.backend().execution().host_task(d_.stream(), ptrs.data(), static_cast<int>(ptrs.size()),
                                       [f, body](void* const* views) {
                                         F g = f;
                                         int i = 0;
                                         g.pointers([&](auto*& p) {
                                           p = static_cast<std::remove_reference_t<decltype(p)>>(views[i++]);
                                         });
                                         body(g);
                                       });
  }

  // An operand's span (Gemm::span_a...) inside its allocation: OpenBLAS on the whole
  // mapping would not notice an overrun; a GPU, and CUDA's bf16 conversion of the span,
  // would. (The emulated allocations are whole pages: only an overrun past the last page
  // is seen.)
  void check_inside(const char* operand, const float* p, size_t floats) const {
    const strata::device::PointerInfo info = d_.backend().memory().query(p);
    const auto* end = reinterpret_cast<const char*>(p + floats);
    if (info.base && end > static_cast<const char*>(info.base) + info.length)
      throw TrainError(std::string("matrix product: operand ") + operand + " spans " + std::to_string(floats) +
                       " floats from " + strata::device::address_text(p) + ", past the end of its allocation (" +
                       std::to_string(info.length) + " bytes at " + strata::device::address_text(info.base) + ")");
  }

  const OnDevice& d_;
};

}  // namespace

std::unique_ptr<Kernels> emulated_kernels(strata::device::Backend& backend) {
  return std::make_unique<FunctorKernels<EmulatedLaunch>>(backend, "emulated");
}

}  // namespace strata::train
