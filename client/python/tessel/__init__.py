"""tessel: tuned ML kernel configs for programs (Lookup, from libtessel), and model descriptions
for `tessel tune-model` (tessel.from_torch, tessel.from_onnx, tessel.model_desc), and a tuned
model's configs at run time (tessel.Model)."""

from tessel.model import Model  # noqa: F401

try:
    from tessel._tessel import Lookup  # noqa: F401  (the compiled part, from the build)
except ImportError as _error:  # a source tree without the build: the importers still work
    _reason = str(_error)

    def Lookup(*args, **kwargs):  # noqa: N802  (the class it stands for)
        raise ImportError("tessel.Lookup needs the compiled module tessel/_tessel, built to "
                          "build/client/python/tessel (PYTHONPATH=build/client/python): " +
                          _reason)
