"""A CPU model's linear layers through oneDNN or MKL, whichever computes their products faster on this machine.

On a CPU torch computes ``nn.Linear`` with MKL's ``sgemm``; torch also ships oneDNN's matrix-product
primitive (``torch.ops.mkldnn._linear_pointwise``, the kernel ``torch.compile`` uses for CPU linear
layers). Which is faster depends on the processor and the shape. On an AMD EPYC with AVX-512 MKL does
not pick its fastest code and oneDNN computed the same float32 products at about 2.5 times the rate on
one thread (2026-12-03: 110 -> 265 GFLOP/s for SmolLM2's ``[64, 576] x [576, 1536]`` decoding step).
On an AMD EPYC without AVX-512 (2026-12-05) MKL was the faster for every SmolLM2 and Gemma-3 layer but
Gemma-3's 262k-entry output head: generating 24 rows of 24 tokens took 4.09 s with every layer on oneDNN,
3.28 s with every layer on MKL and 3.01 s with the head alone on oneDNN (Gemma-3: 8.37, 8.74, 7.71 s).

So :func:`onednn_linears` measures, once per machine, torch version and thread count, each group of a
model's layers that share a weight shape on both kernels (:func:`onednn_is_faster`: a decoding step's
16 rows through every layer of the group, whose weights then come from memory as in a real step, as a
whole model's do) and switches the groups oneDNN computes at least :data:`MARGIN` faster. The verdicts
are kept in ``$FAIRNB_CACHE/linear-kernels.json``. Layers under :data:`LEAST_WEIGHTS` numbers (a test's
tiny model) stay on MKL, where timing would be noise.

The products are float32 throughout; only the order in which each sum is accumulated differs, so an
output differs from MKL's by float32 rounding (about 1e-6 of its size; ``tests/test_linear.py`` checks
1e-5 on a tiny model). With gradients on (a variant's fine-tuning) a switched layer computes as before.
"""
from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable
from pathlib import Path

import torch

from fairnb.models.cache import atomic_write_text, cache_dir

MARGIN = 0.9  # oneDNN is chosen where it takes at most this share of MKL's time
LEAST_WEIGHTS = 2**20  # a group's layers hold at least this many weights in all to be measured
ROWS = 16  # the rows of the measured product: a decoding step's batch
KERNELS_FILE = "linear-kernels.json"


class OneDNNLinear(torch.nn.Linear):
    """``nn.Linear`` whose forward pass, without gradients, is oneDNN's float32 matrix product (see the module
    docstring); its parameters, state dict and class checks are ``nn.Linear``'s."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if input.dtype != torch.float32 or input.device.type != "cpu" or (
                torch.is_grad_enabled() and (input.requires_grad or self.weight.requires_grad)):
            return super().forward(input)
        return onednn_product(input, self.weight, self.bias)


def onednn_product(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` by oneDNN."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


def _onednn_works() -> bool:
    """Whether this torch computes a float32 product through oneDNN, and gets ``F.linear``'s numbers (a build
    or processor without the kernel raises)."""
    if not torch.backends.mkldnn.is_available():
        return False
    x, weight, bias = torch.linspace(-1, 1, 24).reshape(2, 3, 4), torch.linspace(1, -1, 20).reshape(5, 4), torch.ones(5)
    try:
        product = onednn_product(x, weight, bias)
    except (RuntimeError, AttributeError, NotImplementedError):
        return False
    return bool(torch.allclose(product, torch.nn.functional.linear(x, weight, bias), atol=1e-5))


def machine_key() -> str:
    """The processor (vendor, family, model, name, whether it has AVX-512), torch's version and threads."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            name, _, value = line.partition(":")
            name = name.strip()
            if name in ("vendor_id", "cpu family", "model", "model name") and name not in fields:
                fields[name] = value.strip()
            elif name == "flags" and "avx512" not in fields:
                fields["avx512"] = str("avx512f" in value.split())
    except OSError:
        fields["processor"] = f"{platform.machine()} {platform.processor()}"
    return "|".join([*fields.values(), torch.__version__, f"{torch.get_num_threads()} threads"])


def _seconds(product: Callable, x: torch.Tensor, weights: list[torch.Tensor], repeats: int = 3) -> float:
    """The fastest of ``repeats`` passes of ``x`` through every weight, after one pass to warm up."""
    best = float("inf")
    for k in range(repeats + 1):
        start = time.perf_counter()
        for weight in weights:
            product(x, weight)
        if k:
            best = min(best, time.perf_counter() - start)
    return best


def onednn_is_faster(weights: list[torch.Tensor]) -> bool:
    """Whether oneDNN computes :data:`ROWS` rows through every one of ``weights`` (one shape) in at most
    :data:`MARGIN` of MKL's time."""
    x = torch.randn(ROWS, 1, weights[0].shape[1])
    with torch.inference_mode():
        mkl = _seconds(torch.nn.functional.linear, x, weights)
        onednn = _seconds(onednn_product, x, weights)
    return onednn <= MARGIN * mkl


def onednn_linears(model: torch.nn.Module, device: str, dtype: torch.dtype, measure: bool = True) -> int:
    """Switch the ``nn.Linear`` layers of ``model`` that oneDNN computes faster here to :class:`OneDNNLinear`
    (every layer with ``measure=False``), when the model runs on a CPU in float32 and torch computes through
    oneDNN there; the number of layers switched (0 elsewhere)."""
    if str(device) != "cpu" or dtype != torch.float32 or not _onednn_works():
        return 0
    groups: dict[tuple[int, int, int], list[torch.nn.Linear]] = {}
    for module in model.modules():
        if type(module) is torch.nn.Linear:
            groups.setdefault((*module.weight.shape, module.bias is not None), []).append(module)
    faster = _measured_faster(list(groups.values())) if measure else [True] * len(groups)
    chosen = [layers for layers, fast in zip(groups.values(), faster) if fast]
    for layers in chosen:
        for layer in layers:
            layer.__class__ = OneDNNLinear
    return sum(len(layers) for layers in chosen)


def _measured_faster(groups: list[list[torch.nn.Linear]]) -> list[bool]:
    """:func:`onednn_is_faster` for each group's weights, from the kept verdicts where this machine has one;
    False for a group under :data:`LEAST_WEIGHTS` weights."""
    path = cache_dir() / KERNELS_FILE
    try:
        verdicts = json.loads(path.read_text())
    except (OSError, ValueError):
        verdicts = {}
    machine, measured, faster = machine_key(), False, []
    for layers in groups:
        out_features, in_features = layers[0].weight.shape
        key = f"{machine}|{len(layers)} x {out_features} x {in_features}"
        if len(layers) * out_features * in_features < LEAST_WEIGHTS:
            faster.append(False)
            continue
        if not isinstance(verdicts.get(key), bool):
            verdicts[key], measured = onednn_is_faster([layer.weight.detach() for layer in layers]), True
        faster.append(verdicts[key])
    if measured:
        atomic_write_text(path, json.dumps(verdicts, indent=1, sort_keys=True))
    return faster
