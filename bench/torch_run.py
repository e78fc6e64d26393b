#!/usr/bin/python3
"""Peer measurement: PyTorch eval forward, batch 1, THREADS threads (default 1).

usage: /usr/bin/python3 bench/torch_run.py MODEL_NAME STATE.pth INPUT.npy RUNS [THREADS]
Prints "median_ms X". The model is the torchvision constructor with the fixture's
(perturbed) state_dict, so it computes what the exported ONNX computes.
"""
import statistics
import sys
import time

import numpy as np
import torch
import torchvision


def main():
    name, pth, inp, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    torch.set_num_threads(int(sys.argv[5]) if len(sys.argv) > 5 else 1)
    model = getattr(torchvision.models, name)(weights=None).eval()
    model.load_state_dict(torch.load(pth))
    x = torch.from_numpy(np.load(inp))
    with torch.no_grad():
        model(x)
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            model(x)
            times.append((time.perf_counter() - t0) * 1000)
    print("median_ms %.2f" % statistics.median(times))


if __name__ == "__main__":
    main()
