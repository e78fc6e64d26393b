"""Every API rules/mindspore.xml calls is implemented by the stand-in, of the kind the rule
says (a Cell class or a function), and every <arg> a rule passes is a parameter of the
stand-in's (= the table's) signature or, for a cell, one of its parameter names."""
import inspect
import os
import re
import unittest
import xml.etree.ElementTree as ET

import standin_path
import mindspore as ms
from mindspore import nn

RULES = os.path.join(standin_path.REPO, "rules", "mindspore.xml")


def resolve(api):
    obj = ms
    for part in api.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def cell_param_names(cell):
    return {n.rsplit(".", 1)[-1] for n, _ in cell.parameters_and_names()}


@unittest.skipUnless(os.path.isfile(RULES), "no rules/mindspore.xml")
class TestRulesAPIs(unittest.TestCase):
    def test_calls(self):
        calls = ET.parse(RULES).getroot().iter("call")
        seen = set()
        for call in calls:
            api, kind = call.get("api"), call.get("kind")
            seen.add(api)
            obj = resolve(api)
            self.assertFalse(getattr(obj, "_ms_unimplemented", False), "%s is used by a rule" % api)
            if kind == "cell":
                self.assertTrue(inspect.isclass(obj) and issubclass(obj, nn.Cell), api)
                sig = inspect.signature(obj.__init__)
            else:
                self.assertFalse(inspect.isclass(obj), api)
                sig = inspect.signature(obj)
            names = {p.name for p in sig.parameters.values()}
            for arg in call.iter("arg"):
                n = arg.get("name").lstrip("*")
                if n in names:
                    continue
                # a cell's parameter (e.g. nn.LSTM weight_ih_l0): filled by the checkpoint
                self.assertEqual(kind, "cell", "%s: %s is not a parameter of the signature" % (api, n))
                self.assertTrue(re.fullmatch(r"(weight|bias)_(ih|hh)_l\d+(_reverse)?", n) and api == "mindspore.nn.LSTM",
                                "%s: %s is neither a constructor argument nor a known parameter" % (api, n))
        self.assertGreater(len(seen), 30)

    def test_lstm_parameter_names_match_the_rule(self):
        lstm = nn.LSTM(3, 2, bidirectional=True)
        self.assertEqual(cell_param_names(lstm),
                         {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l0_reverse",
                          "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse"})


if __name__ == "__main__":
    unittest.main()
