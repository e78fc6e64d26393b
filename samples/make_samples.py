#!/usr/bin/python3
"""Regenerates the bundled sample models in samples/.

usage: /usr/bin/python3 samples/make_samples.py

tiny_cnn: Conv-BN-ReLU x2, global pool, Linear: a ResNet-like stem small enough to
commit. Every parameter and BatchNorm statistic is perturbed from its initial value
so that no layer is an identity. Written as the default eval export (BatchNorm
folded), the TrainingMode.PRESERVE export (torch names kept), the state_dict, an
input and torch's output for it.
"""
import os

import numpy as np
import torch
import torch.nn as nn


class TinyCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    torch.manual_seed(0)
    model = TinyCNN().eval()
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if t.dtype.is_floating_point:
                if name.endswith("running_var"):
                    t.uniform_(0.5, 1.5)
                else:
                    t.add_(torch.randn_like(t) * 0.1)
    x = torch.randn(1, 3, 32, 32)
    np.save(os.path.join(here, "tiny_cnn_input.npy"), x.numpy())
    with torch.no_grad():
        np.save(os.path.join(here, "tiny_cnn_logits.npy"), model(x).numpy())
    torch.save(model.state_dict(), os.path.join(here, "tiny_cnn.pth"))
    torch.onnx.export(model, x, os.path.join(here, "tiny_cnn.onnx"), opset_version=17,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    torch.onnx.export(model, x, os.path.join(here, "tiny_cnn_preserve.onnx"), opset_version=17,
                      input_names=["input"], output_names=["logits"],
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)
    print("wrote tiny_cnn.onnx, tiny_cnn_preserve.onnx, tiny_cnn.pth, tiny_cnn_input.npy, tiny_cnn_logits.npy")


if __name__ == "__main__":
    main()
