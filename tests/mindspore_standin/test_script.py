"""A net.py in the generated scripts' style (every argument explicit, as the rules emit
them) runs in a fresh /usr/bin/python3 with PYTHONPATH=tests/mindspore_standin, loads a
checkpoint with nothing missing or left over, and gives torch's result."""
import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np
import torch
import torch.nn.functional as F

import standin_path

NET_PY = r'''
import sys
import numpy as np
import mindspore
from mindspore import nn, ops


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(in_channels=3, out_channels=4, kernel_size=(3, 3), stride=(1, 1), pad_mode='pad',
                              padding=(1, 1, 1, 1), dilation=(1, 1), group=1, has_bias=True, weight_init=None,
                              bias_init=None, data_format='NCHW', dtype=mindspore.float32)
        self.bn = nn.BatchNorm2d(num_features=4, eps=1e-05, momentum=0.9, affine=True, gamma_init='ones',
                                 beta_init='zeros', moving_mean_init='zeros', moving_var_init='ones',
                                 use_batch_statistics=False, data_format='NCHW', dtype=mindspore.float32)
        self.pool = nn.MaxPool2d(kernel_size=(2, 2), stride=(2, 2), pad_mode='valid', padding=0, dilation=1,
                                 return_indices=False, ceil_mode=False, data_format='NCHW')
        self.flatten = nn.Flatten(start_dim=1, end_dim=-1)
        self.fc = nn.Dense(in_channels=4, out_channels=2, weight_init=None, bias_init=None, has_bias=True,
                           activation=None, dtype=mindspore.float32)

    def construct(self, x):
        y = self.pool(ops.relu(input=self.bn(self.conv(x)), inplace=False))
        y = ops.mean(x=y, axis=(2, 3), keep_dims=True)
        return ops.softmax(input=self.fc(self.flatten(y)), axis=-1, dtype=None)


net = Net()
not_loaded, unused = mindspore.load_param_into_net(net, mindspore.load_checkpoint(sys.argv[1]), strict_load=True)
assert not_loaded == [] and unused == [], (not_loaded, unused)
x = mindspore.Tensor(np.load(sys.argv[2]))
np.save(sys.argv[3], net(x).asnumpy())
'''


class TestScript(unittest.TestCase):
    def test_net_py(self):
        d = tempfile.mkdtemp()
        try:
            rng = np.random.default_rng(3)
            P = {"conv.weight": rng.standard_normal((4, 3, 3, 3)), "conv.bias": rng.standard_normal(4),
                 "bn.gamma": rng.standard_normal(4), "bn.beta": rng.standard_normal(4),
                 "bn.moving_mean": rng.standard_normal(4), "bn.moving_variance": rng.random(4) + 0.5,
                 "fc.weight": rng.standard_normal((2, 4)), "fc.bias": rng.standard_normal(2)}
            P = {k: v.astype(np.float32) for k, v in P.items()}
            import mindspore as ms
            ms.save_checkpoint([{"name": k, "data": ms.Tensor(v)} for k, v in P.items()], os.path.join(d, "w.ckpt"))
            x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
            np.save(os.path.join(d, "x.npy"), x)
            with open(os.path.join(d, "net.py"), "w") as f:
                f.write(NET_PY)
            env = dict(os.environ, PYTHONPATH=standin_path.HERE, PYTHONDONTWRITEBYTECODE="1")
            r = subprocess.run(["/usr/bin/python3", "net.py", "w.ckpt", "x.npy", "y.npy"], cwd=d, env=env,
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            got = np.load(os.path.join(d, "y.npy"))
            T = {k: torch.from_numpy(v) for k, v in P.items()}
            y = F.conv2d(torch.from_numpy(x), T["conv.weight"], T["conv.bias"], padding=1)
            y = F.batch_norm(y, T["bn.moving_mean"], T["bn.moving_variance"], T["bn.gamma"], T["bn.beta"], eps=1e-5)
            y = F.max_pool2d(F.relu(y), 2, 2).mean(dim=(2, 3))
            want = torch.softmax(F.linear(y, T["fc.weight"], T["fc.bias"]), -1)
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)
            # the same script with a torch-style keyword fails loudly
            with open(os.path.join(d, "net.py"), "w") as f:
                f.write(NET_PY.replace("keep_dims=True", "keepdim=True"))
            r = subprocess.run(["/usr/bin/python3", "net.py", "w.ckpt", "x.npy", "y.npy"], cwd=d, env=env,
                               capture_output=True, text=True)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("mindspore.ops.mean", r.stderr)
        finally:
            shutil.rmtree(d)


if __name__ == "__main__":
    unittest.main()
