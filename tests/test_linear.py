"""Linear layers through oneDNN give MKL's float32 products up to rounding, train as before, and are switched
where oneDNN measured faster on this machine (the verdict kept per machine)."""
from __future__ import annotations

import time

import pytest
import torch

from fairnb.models import generation, linear
from fairnb.models.batching import left_pad
from fairnb.models.linear import OneDNNLinear, onednn_linears
from tests.test_generation import PAD, ROWS, TOP_K, fake_lm, tiny_causal

pytestmark = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch built without oneDNN")


def test_a_layer_gives_the_plain_product_up_to_float32_rounding():
    """Against float64 arithmetic, for a bias and none, a 3-d and a non-contiguous input."""
    torch.manual_seed(0)
    for bias in (True, False):
        plain = torch.nn.Linear(48, 80, bias=bias)
        fast = torch.nn.Linear(48, 80, bias=bias)
        fast.load_state_dict(plain.state_dict())
        assert onednn_linears(fast, "cpu", torch.float32, measure=False) == 1 and isinstance(fast, OneDNNLinear)
        for x in (torch.randn(5, 7, 48), torch.randn(48, 9).t()):
            with torch.inference_mode():
                exact = torch.nn.functional.linear(x.double(), plain.weight.double(),
                                                   None if plain.bias is None else plain.bias.double())
                got = fast(x)
                assert got.dtype == torch.float32 and got.shape == exact.shape
                assert torch.allclose(got.double(), exact, rtol=1e-5, atol=1e-5)
                assert torch.allclose(got, plain(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_a_switched_model_decodes_the_same_tokens(kind):
    """Every linear layer of a tiny Llama and Gemma-3 switched (the output head included); its logits within
    1e-5 of MKL's and the same top-k sampled tokens over 8 steps."""
    model = tiny_causal(kind)
    lm = fake_lm(model, eos=-1)
    ids, mask = left_pad(ROWS, PAD)
    with torch.inference_mode():
        before = model(input_ids=ids, attention_mask=mask).logits
        tokens = generation._decode(lm, dict(input_ids=ids), mask, generation._cache(lm, None),
                                    TOP_K.processors(range(len(ROWS)), "cpu"), 8)
        linears = sum(type(m) is torch.nn.Linear for m in model.modules())
        assert onednn_linears(model, "cpu", torch.float32, measure=False) == linears > 0
        assert isinstance(model.get_output_embeddings(), OneDNNLinear)
        after = model(input_ids=ids, attention_mask=mask).logits
        again = generation._decode(lm, dict(input_ids=ids), mask, generation._cache(lm, None),
                                   TOP_K.processors(range(len(ROWS)), "cpu"), 8)
    assert torch.allclose(after, before, rtol=1e-5, atol=1e-5)
    assert torch.equal(tokens, again)


def test_with_gradients_a_layer_computes_as_before_and_learns():
    """Fine-tuning a variant: the plain product, gradients to the weight, and a changed weight is read."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(6, 4)
    onednn_linears(layer, "cpu", torch.float32, measure=False)
    x = torch.randn(3, 6)
    layer(x).sum().backward()
    assert layer.weight.grad is not None and torch.equal(layer.weight.grad, x.sum(0).expand(4, -1))
    with torch.no_grad():
        layer.weight.mul_(2)
        assert torch.allclose(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias), atol=1e-6)


def missing_kernel(*args):
    raise RuntimeError("Could not run 'mkldnn::_linear_pointwise' with arguments from the 'CPU' backend.")


def test_only_float32_models_on_a_cpu_where_onednn_computes_are_switched(monkeypatch):
    layer = torch.nn.Linear(4, 4)
    assert onednn_linears(layer, "cuda", torch.float32, measure=False) == 0 and type(layer) is torch.nn.Linear
    assert onednn_linears(layer, "cpu", torch.bfloat16, measure=False) == 0 and type(layer) is torch.nn.Linear
    with monkeypatch.context() as patched:  # a torch whose build or processor lacks the kernel
        patched.setattr(torch.ops.mkldnn, "_linear_pointwise", missing_kernel, raising=False)
        assert onednn_linears(layer, "cpu", torch.float32, measure=False) == 0 and type(layer) is torch.nn.Linear
    assert onednn_linears(layer, "cpu", torch.float32, measure=False) == 1


def test_the_groups_oneDNN_measured_faster_are_switched_and_the_verdict_is_kept(tmp_path, monkeypatch):
    """Layers grouped by weight shape: the group measured faster on oneDNN is switched, the other and a group
    too small to time stay; a second model of the same shapes reads the kept verdicts, measuring nothing."""
    monkeypatch.setenv("FAIRNB_CACHE", str(tmp_path))
    measured = []

    def faster(weights):
        measured.append((len(weights), *weights[0].shape))
        return weights[0].shape[0] == 2048

    monkeypatch.setattr(linear, "onednn_is_faster", faster)
    monkeypatch.setattr(linear, "LEAST_WEIGHTS", 2**16)

    def model():
        return torch.nn.Sequential(torch.nn.Linear(64, 2048), torch.nn.Linear(2048, 64), torch.nn.Linear(64, 2048),
                                   torch.nn.Linear(8, 8))

    first = model()
    assert onednn_linears(first, "cpu", torch.float32) == 2
    assert [type(m) is OneDNNLinear for m in first] == [True, False, True, False]
    assert sorted(measured) == [(1, 64, 2048), (2, 2048, 64)]  # the 8 x 8 layer is not timed
    kept = (tmp_path / linear.KERNELS_FILE).read_text()
    assert linear.machine_key() in kept and torch.__version__ in linear.machine_key()
    second = model()
    assert onednn_linears(second, "cpu", torch.float32) == 2 and len(measured) == 2
    assert [type(m) is OneDNNLinear for m in second] == [True, False, True, False]


def test_the_measurement_compares_the_two_kernels_on_the_same_products(monkeypatch):
    """oneDNN is chosen when it takes at most MARGIN of MKL's time: a slowed-down oneDNN loses, a slowed-down
    MKL wins."""
    weights = [torch.randn(256, 64) for _ in range(3)]
    real_onednn, real_mkl = linear.onednn_product, torch.nn.functional.linear

    def slowed(product):
        def slow(*args):
            time.sleep(0.002)
            return product(*args)
        return slow

    monkeypatch.setattr(linear, "onednn_product", slowed(real_onednn))
    assert linear.onednn_is_faster(weights) is False
    monkeypatch.setattr(linear, "onednn_product", real_onednn)
    monkeypatch.setattr(torch.nn.functional, "linear", slowed(real_mkl))
    assert linear.onednn_is_faster(weights) is True
