"""The tuned configs of a model's ops at run time, from `tessel export --model FILE --format json`.

    import tessel
    model = tessel.Model("llama_configs.json")
    model.config("q_proj")     # {"tile_m": 128, "tile_n": 512, ..., "loop_order": "nmk"}
    model.op("q_proj")         # every field: kernel, dims, dtype, config, match, time_ns, ...

Plain Python: no server, no compiled module. The configs are what tessel's graded lookup
answered for each op's workload when the file was exported (exact when the workload was tuned,
else the nearest tuned one adapted to it, else the kernel's default), so each is valid for its op.
"""

import json

FORMAT = 1


def parse_config(text):
    """{"tile_m": 128, "loop_order": "nmk"} from "tile_m=128,loop_order=nmk" (ints as ints)."""
    config = {}
    for part in filter(None, text.split(",")):
        name, _, value = part.partition("=")
        try:
            config[name] = int(value)
        except ValueError:
            config[name] = value
    return config


class Model:
    def __init__(self, path):
        with open(path) as f:
            data = json.load(f)
        if not isinstance(data, dict) or data.get("format") != FORMAT or "ops" not in data:
            raise ValueError(f"{path}: not a model export of format {FORMAT} "
                             "(write one with `tessel export --model FILE --format json`)")
        self.name = data.get("model", "")
        self.target = data.get("target", "")
        self._ops = {op["name"]: op for op in data["ops"]}

    @property
    def ops(self):
        """The op names, in the model's order."""
        return list(self._ops)

    def op(self, name):
        """Every field of op `name`: kernel, dims, dtype, count, config, match, time_ns, ..."""
        try:
            return dict(self._ops[name])
        except KeyError:
            known = ", ".join(sorted(self._ops)[:20])
            raise KeyError(f"model {self.name} has no op '{name}' (its ops: {known})") from None

    def config(self, name):
        """The config of op `name` as a dict of parameter values."""
        return parse_config(self.op(name)["config"])
