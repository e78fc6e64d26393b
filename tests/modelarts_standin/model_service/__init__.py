"""A test-only stand-in for ModelArts' model_service package (see model_service.py)."""
