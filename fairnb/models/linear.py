"""A CPU model's linear layers through oneDNN instead of MKL's general matrix product.

On a CPU torch computes ``nn.Linear`` with MKL's ``sgemm``. Where MKL does not pick its fastest code
for the processor (MKL tunes its kernels for Intel's; this project's AMD EPYC machines get a slower
path), oneDNN's matrix-product primitive, which torch ships too (``torch.ops.mkldnn._linear_pointwise``,
the kernel ``torch.compile`` uses for CPU linear layers), computes the same float32 products at about
2.5 times the rate on one thread: 110 -> 265 GFLOP/s for SmolLM2's ``[64, 576] x [576, 1536]`` decoding
step, 117 -> 270 GFLOP/s for a 1,800-position prompt, 66 -> 157 GFLOP/s for Gemma-3's 262k-entry output
head. It reads the layer's own dense weight (no second copy, nothing to go stale when a weight changes).

The products are float32 throughout; only the order in which each sum is accumulated differs, so an
output differs from MKL's by float32 rounding (about 1e-6 of its size; ``tests/test_models.py`` checks
1e-5 on a tiny model). Linear layers are 57-72 % of a chapter-4 page's time, so every page that runs
a model on a CPU gains. :func:`onednn_linears` switches a loaded model's layers; with gradients on (a
variant's fine-tuning) a layer computes as before.
"""
from __future__ import annotations

import torch


class OneDNNLinear(torch.nn.Linear):
    """``nn.Linear`` whose forward pass, without gradients, is oneDNN's float32 matrix product (see the module
    docstring); its parameters, state dict and class checks are ``nn.Linear``'s."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if input.dtype != torch.float32 or input.device.type != "cpu" or (
                torch.is_grad_enabled() and (input.requires_grad or self.weight.requires_grad)):
            return super().forward(input)
        return torch.ops.mkldnn._linear_pointwise(input, self.weight, self.bias, "none", [], "")


def _onednn_works() -> bool:
    """Whether this torch computes a float32 product through oneDNN, and gets ``F.linear``'s numbers (a build
    or processor without the kernel raises)."""
    if not torch.backends.mkldnn.is_available():
        return False
    x, weight, bias = torch.linspace(-1, 1, 24).reshape(2, 3, 4), torch.linspace(1, -1, 20).reshape(5, 4), torch.ones(5)
    try:
        product = torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
    except (RuntimeError, AttributeError, NotImplementedError):
        return False
    return bool(torch.allclose(product, torch.nn.functional.linear(x, weight, bias), atol=1e-5))


def onednn_linears(model: torch.nn.Module, device: str, dtype: torch.dtype) -> int:
    """Switch every ``nn.Linear`` of ``model`` to :class:`OneDNNLinear` when it runs on a CPU in float32 and
    torch computes through oneDNN there; the number of layers switched (0 elsewhere)."""
    if str(device) != "cpu" or dtype != torch.float32 or not _onednn_works():
        return 0
    switched = 0
    for module in model.modules():
        if type(module) is torch.nn.Linear:
            module.__class__ = OneDNNLinear
            switched += 1
    return switched
