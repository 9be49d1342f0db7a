// The kernel registry (FindKernel and AllKernels, declared in kernel.h). It lives apart from
// kernel.cc because it names every kernel: kernel.cc depends on no kernel, and each kernel on
// kernel.h, so the folder's dependencies stay one-way.
#include <algorithm>
#include <string_view>
#include <vector>

#include "kernels/attention.h"
#include "kernels/bmm.h"
#include "kernels/conv2d.h"
#include "kernels/kernel.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "kernels/softmax.h"

namespace tessel::kernels {

const Kernel* FindKernel(std::string_view name) {
  for (const Kernel* kernel : AllKernels()) {
    if (kernel->name() == name) return kernel;
  }
  return nullptr;
}

std::vector<const Kernel*> AllKernels() {
  static const MatmulKernel* const kMatmul = new MatmulKernel();
  static const BmmKernel* const kBmm = new BmmKernel();
  static const AttentionKernel* const kAttention = new AttentionKernel();
  static const SoftmaxKernel* const kSoftmax = new SoftmaxKernel();
  static const NormKernel* const kLayerNorm = new NormKernel(/*rms=*/false);
  static const NormKernel* const kRmsNorm = new NormKernel(/*rms=*/true);
  static const Conv2dKernel* const kConv2d = new Conv2dKernel();
  std::vector<const Kernel*> kernels = {kMatmul,    kBmm,     kAttention, kSoftmax,
                                        kLayerNorm, kRmsNorm, kConv2d};
  std::sort(kernels.begin(), kernels.end(),
            [](const Kernel* a, const Kernel* b) { return a->name() < b->name(); });
  return kernels;
}

}  // namespace tessel::kernels
