"""Put the stand-in package (this folder) first on sys.path; imported by every test."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
SHARED = os.path.normpath(os.path.join(REPO, "..", "shared"))
if not os.path.isdir(SHARED) and os.path.isdir(os.path.join(REPO, "shared")):
    SHARED = os.path.join(REPO, "shared")
if HERE not in sys.path:
    sys.path.insert(0, HERE)
