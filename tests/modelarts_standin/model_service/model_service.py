"""A test-only stand-in for ModelArts' `model_service.model_service`, the module of the
MindSpore base class, holding what ../shared/targets/facts.md 1.3 documents and nothing
more:

- `SingleNodeService`, imported as `from model_service.model_service import SingleNodeService`;
- its methods a service may override: `__init__(self, model_name, model_path)`,
  `_preprocess(self, data)`, `_inference(self, data)`, `_postprocess(self, data)`;
- `self.model_path`, the model's local path.

The built-in inference is not documented, so the default `_inference` raises: a service
must override it. How the platform calls the three methods and turns an exception into
an HTTP status is not documented either; tests/fixtures/modelarts_call.py does that for
the tests, and says how."""


class SingleNodeService:
    def __init__(self, model_name, model_path):
        self.model_name = model_name
        self.model_path = model_path

    def _preprocess(self, data):
        return data

    def _inference(self, data):
        raise NotImplementedError("ModelArts' built-in inference is not documented (facts.md 1.3): the "
                                  "ModelArts stand-in has none; override _inference")

    def _postprocess(self, data):
        return data
