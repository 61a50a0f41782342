"""How planes are exported through DLPack (the producer side of the handshake)."""

import contextlib
import sys
import types

import numpy as np

import vmaf_hip


def test_torch_gpu_tensor_exports_with_its_device_current(monkeypatch):
    """PyTorch orders a tensor's writes for `__dlpack__(stream=...)` on the *current* device's
    streams: a tensor on cuda:1 must be exported with cuda:1 current (a stand-in torch
    records which device was current)."""
    current = [0]
    calls = []

    @contextlib.contextmanager
    def device(i):
        old, current[0] = current[0], i
        try:
            yield
        finally:
            current[0] = old

    class Tensor:
        def __init__(self, array, index):
            self.array, self.index = array, index

        def __dlpack_device__(self):
            return (2, self.index)

        def __dlpack__(self, stream=None, max_version=None):
            calls.append((current[0], stream))
            return self.array.__dlpack__()

    torch = types.ModuleType("torch")
    torch.Tensor = Tensor
    torch.cuda = types.SimpleNamespace(device=device)
    monkeypatch.setitem(sys.modules, "torch", torch)
    vmaf_hip._capsule(Tensor(np.zeros((4, 4), np.uint8), 1), "reference", 0)
    assert calls == [(1, 1)]
    assert current == [0]
    # Host arrays and other producers are exported as they are.
    vmaf_hip._capsule(np.zeros((4, 4), np.uint8), "reference", 0)
