#!/usr/bin/python3
"""Differential test of the meta.json parser (cli/meta.c) against Python's json.

Every file of the meta fuzz corpus, a set of generated tricky documents and
seeded random mutations of them go through both:

  - the parser, via the meta_check driver (ok / syntax / invalid / limit);
  - Python: one leading UTF-8 byte order mark dropped (the parser's documented
    choice, as json.loads does for bytes), strict UTF-8 decoding, then
    json.loads with NaN/Infinity/-Infinity refused (parse_constant), control
    characters in strings refused (strict, the default), numbers kept as text
    (no digit limit), and no recursion limit in the way (a thread with a large
    stack), so Python decides RFC 8259 syntax alone.

They must agree on syntax: Python accepts exactly what the parser classifies
as ok or invalid, except documents nested deeper than CP_META_MAX_DEPTH, which
the parser must refuse as limit. For documents that are JSON, the meaning of
meta.json is checked again here, independently (an object; dtype a string of
printable ASCII of at most 15 bytes; bias true/false; the integer keys
integers in 0..2^62 without fraction or exponent; each known key once; all
but seed and the layer keys present; the layer keys: padding and pool_padding
arrays of exactly 4 such integers, pool_stride, stride, dilation and groups
such an integer >= 1, ceil_mode and residual true/false, activation "none",
"relu", "relu6" or an object whose
only member is "clamp": an array of exactly 2 numbers, each rounding to a
finite float32), and must match ok/invalid, with the same values for ok.

Usage: meta_differential.py path/to/meta_check CORPUS_DIR [MUTATIONS_PER_SEED]
"""
import json
import os
import math
import random
import re
import struct
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
META_H = os.path.join(HERE, "..", "..", "cli", "meta.h")
MAX_DEPTH = int(re.search(r"CP_META_MAX_DEPTH = (\d+)", open(META_H).read()).group(1))
BOM = b"\xef\xbb\xbf"
INT_KEYS = ["batch", "in_channels", "out_channels", "height", "width", "filter", "pool", "seed"]
LAYER_KEYS = ["padding", "activation", "pool_stride", "pool_padding", "ceil_mode", "stride",
              "dilation", "groups", "residual"]
POSITIVE_KEYS = ["pool_stride", "stride", "dilation", "groups"]
KNOWN = ["dtype"] + INT_KEYS[:-1] + ["bias", "seed"] + LAYER_KEYS
OPTIONAL = ["seed"] + LAYER_KEYS

VALID = (b'{"dtype": "float32", "batch": 2, "in_channels": 3, "out_channels": 4, '
         b'"height": 10, "width": 9, "filter": 3, "pool": 2, "bias": true, "seed": 0}')


class Obj(list):
    """An object as its list of (key, value) pairs: duplicates are kept."""


class Num(str):
    """A number as written; .integer tells whether it has no fraction or exponent."""

    def __new__(cls, text, integer):
        s = super().__new__(cls, text)
        s.integer = integer
        return s


def depth_of(value):
    best, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, Obj):
            best = max(best, d)
            stack.extend((x, d + 1) for _, x in v)
        elif isinstance(v, list):
            best = max(best, d)
            stack.extend((x, d + 1) for x in v)
    return best


def no_constant(name):
    raise ValueError("%s is not JSON" % name)


def python_syntax(data):
    """(True, value) when data is RFC 8259 JSON, else (False, reason)."""
    if data.startswith(BOM):
        data = data[len(BOM):]
    try:
        text = data.decode("utf-8")  # strict: overlong forms, surrogates, > U+10FFFF refused
    except UnicodeDecodeError as e:
        return False, "not UTF-8: %s" % e
    try:
        value = json.loads(text, object_pairs_hook=Obj, parse_constant=no_constant,
                           parse_int=lambda s: Num(s, True), parse_float=lambda s: Num(s, False))
    except ValueError as e:  # json.JSONDecodeError included
        return False, str(e)
    return True, value


def is_array(v):
    return isinstance(v, list) and not isinstance(v, Obj)


def is_string(v):
    return isinstance(v, str) and not isinstance(v, Num)


def integer_problem(v, name):
    """None when v is an integer in 0..2^62 written without fraction or exponent."""
    if not isinstance(v, Num) or not v.integer:
        return "%s not an integer" % name
    if v.startswith("-"):
        return "%s negative" % name
    if len(v) > 20 or int(v) > 2 ** 62:
        return "%s too large" % name
    return None


def as_float32(v):
    """The float32 a JSON number rounds to, or None when that is not finite."""
    d = float(v)  # correctly rounded to double, as strtod
    if math.isinf(d):
        return None
    try:
        return struct.unpack("<f", struct.pack("<f", d))[0]  # to nearest; overflow raises
    except OverflowError:
        return None


def sides(v, name):
    """(problem, [t, l, b, r]) of padding or pool_padding."""
    if not is_array(v):
        return "%s not an array" % name, None
    if len(v) != 4:
        return "%s has %d items" % (name, len(v)), None
    for i, item in enumerate(v):
        problem = integer_problem(item, "%s[%d]" % (name, i))
        if problem:
            return problem, None
    return None, [int(item) for item in v]


def activation(v):
    """(problem, text) of the activation key; text as meta_check prints it."""
    if is_string(v):
        names = {"none": "none", "relu": "relu", "relu6": "clamp:0,6"}
        if v in names:
            return None, names[v]
        return "unknown activation %r" % v, None
    if not isinstance(v, Obj):
        return "activation neither a string nor an object", None
    if len(v) != 1 or v[0][0] != "clamp":
        return "activation object is not {clamp: ...}", None
    bounds = v[0][1]
    if not is_array(bounds) or len(bounds) != 2:
        return "clamp not an array of 2", None
    out = []
    for b in bounds:
        if not isinstance(b, Num):
            return "clamp bound not a number", None
        f = as_float32(b)
        if f is None:
            return "clamp bound beyond float32", None
        out.append("%.9g" % f)
    return None, "clamp:" + ",".join(out)


def python_meaning(value):
    """'ok VALUES' or 'invalid REASON' for a JSON value, per cli/meta.h."""
    if not isinstance(value, Obj):
        return "invalid", "not an object"
    got = {}
    for key, v in value:
        if key not in KNOWN:
            continue
        if key in got:
            return "invalid", "duplicate %s" % key
        got[key] = v
    layer = {"padding": [0, 0, 0, 0], "activation": "none", "pool_stride": 0,
             "pool_padding": [0, 0, 0, 0], "ceil_mode": False, "stride": 0, "dilation": 0,
             "groups": 0, "residual": False}
    for key in KNOWN:
        if key not in got:
            if key == "seed":
                got[key] = Num("0", True)
                continue
            if key in OPTIONAL:
                continue
            return "invalid", "missing %s" % key
        v = got[key]
        if key in ("padding", "pool_padding"):
            problem, layer[key] = sides(v, key)
            if problem:
                return "invalid", problem
        elif key == "activation":
            problem, layer[key] = activation(v)
            if problem:
                return "invalid", problem
        elif key in ("ceil_mode", "residual"):
            if not isinstance(v, bool):
                return "invalid", "%s not a boolean" % key
            layer[key] = v
        elif key in POSITIVE_KEYS:
            problem = integer_problem(v, key)
            if problem:
                return "invalid", problem
            if int(v) < 1:
                return "invalid", "%s below 1" % key
            layer[key] = int(v)
        elif key == "dtype":
            if not isinstance(v, str) or isinstance(v, Num):
                return "invalid", "dtype not a string"
            if len(v.encode("utf-8", "surrogatepass")) > 15:
                return "invalid", "dtype too long"
            if any(not (0x20 <= ord(c) < 0x7f) for c in v):
                return "invalid", "dtype not printable ASCII"
        elif key == "bias":
            if not isinstance(v, bool):
                return "invalid", "bias not a boolean"
        else:
            problem = integer_problem(v, key)
            if problem:
                return "invalid", problem
    values = "dtype=%s %s bias=%d seed=%d" % (
        got["dtype"].replace("\\", "\\x5c"), " ".join("%s=%d" % (k, int(got[k])) for k in INT_KEYS[:-1]),
        1 if got["bias"] else 0, int(got["seed"]))
    values += " padding=%s activation=%s pool_stride=%d pool_padding=%s ceil_mode=%d" % (
        ",".join(map(str, layer["padding"])), layer["activation"], layer["pool_stride"],
        ",".join(map(str, layer["pool_padding"])), 1 if layer["ceil_mode"] else 0)
    values += " stride=%d dilation=%d groups=%d residual=%d" % (
        layer["stride"], layer["dilation"], layer["groups"], 1 if layer["residual"] else 0)
    return "ok", values


def expected(data):
    """The classes the parser may give, and the values when ok."""
    is_json, value = python_syntax(data)
    if not is_json:
        return {"syntax", "limit"}, None, value
    if depth_of(value) > MAX_DEPTH:
        return {"limit"}, None, "nested %d deep" % depth_of(value)
    cls, detail = python_meaning(value)
    return {cls}, detail if cls == "ok" else None, detail


# ---- documents ----

def with_value(key, fragment):
    """VALID with key's value replaced by fragment (bytes)."""
    m = re.search(rb'"%s": [^,}]*' % key.encode(), VALID)
    return VALID[:m.start()] + b'"' + key.encode() + b'": ' + fragment + VALID[m.end():]


def with_extra(fragment):
    return VALID[:-1] + b', "extra": ' + fragment + b"}"


VALUES = [
    # numbers
    b"0", b"-0", b"012", b"00", b"-01", b"01.5", b"1.", b".5", b"1.5", b"1e5", b"1E+5", b"1e-5",
    b"1e05", b"1e", b"1e+", b"-", b"--1", b"+1", b"0x10", b"1_000", b"2e0", b"2.0", b"-1",
    b"4611686018427387904", b"4611686018427387905", b"18446744073709551626", b"1" * 400,
    b"1e999999", b"-0.0e-0", b"0.0001", b"NaN", b"Infinity", b"-Infinity", b"nan", b"inf",
    b"1 2", b"1-2", b"1.2.3",
    # literals and bare words
    b"true", b"false", b"null", b"True", b"nul", b"tru", b"truex", b"nulll", b"foo",
    b"undefined", b"t", b"f",
    # strings
    b'"abc"', b'"float32"', b'"float\\u0033\\u0032"', b'"\\u0041"', b'"\\u00e9"',
    b'"\\ud83d\\ude00"', b'"\\ud83d"', b'"\\ude00"', b'"\\ude00\\ud83d"', b'"\\ud83d\\u0041"',
    b'"\\ud83dx"', b'"\\ud83d\\ud83d\\ude00"', b'"\\u12"', b'"\\u12G4"', b'"\\U0041"', b'"\\x41"',
    b'"\\a"', b'"\\/"', b'"\\b\\f\\n\\r\\t\\"\\\\"', b'"\\u0000"', b'"float32\\u0000"',
    b'"a\x01b"', b'"a\tb"', b'"a\x7fb"', b'"\xe2\x80\xa8"', b"'single'", b'"unterminated',
    b'"a\\"', b'"\\', b'"\xc3\xa9"', b'"\xc0\xaf"', b'"\xed\xa0\x80"', b'"\xf0\x9f\x98\x80"',
    b'"\xf4\x90\x80\x80"', b'"\x80"', b'"\xe2\x82"', b'"\xf8\x88\x80\x80\x80"', b'"\xef\xbb\xbf"',
    b'"\xff"', b'"' + b"x" * 100 + b'"', b'"bfloat16"', b'"float16 "',
    # containers
    b"[]", b"{}", b"[1,2]", b"[1,]", b"[,1]", b"[1 2]", b"[1,,2]", b'{"a":1,}', b"{,}",
    b'{"a" 1}', b'{"a":}', b"{1:2}", b"{'a':1}", b'{"a":1 "b":2}', b"[[[]]]",
    b'{"a":{"b":{"c":[1,{"d":null}]}}}', b"[", b"]", b"{", b"}", b'{"a":1', b"[1", b'{"a"}',
    b'{"a":1}}', b"[1]]", b'["a",{"b":[true,false,null]}]',
]

# The layer keys, each with a good value (VALID_LAYER has them all).
LAYER = [("padding", b"[1, 2, 0, 3]"), ("activation", b'{"clamp": [0.5, 6]}'),
         ("pool_stride", b"1"), ("pool_padding", b"[1, 0, 1, 1]"), ("ceil_mode", b"true"),
         ("stride", b"2"), ("dilation", b"1"), ("groups", b"3"), ("residual", b"false")]


def with_layer(key, fragment):
    """VALID with every layer key, key's value replaced by fragment (bytes)."""
    parts = [b'"%s": %s' % (k.encode(), fragment if k == key else v) for k, v in LAYER]
    return VALID[:-1] + b", " + b", ".join(parts) + b"}"


VALID_LAYER = with_layer(None, None)

SIDES = [
    b"[0, 0, 0, 0]", b"[1,2,3,4]", b"[4611686018427387904, 0, 0, 0]",
    b"[0, 4611686018427387905, 0, 0]", b"[0, 0, 0, 18446744073709551626]", b"[1, 2, 3]",
    b"[1, 2, 3, 4, 5]", b"[]", b"[[]]", b"[1, -1, 0, 0]", b"[-0, 0, 0, 0]", b"[1.0, 0, 0, 0]",
    b"[0, 1e0, 0, 0]", b'["1", 0, 0, 0]', b"[null, 0, 0, 0]", b"[true, 0, 0, 0]",
    b"[[1], 2, 3, 4]", b'[{"a": 1}, 2, 3, 4]', b'{"top": 1}', b"1", b'"1,2,3,4"', b"null",
    b"[1, 2, 3, 4,]", b"[1,, 2, 3]", b"[1 2 3 4]", b"[1, 2, 3, 4", b"[01, 2, 3, 4]",
    b"[1, 2, 3, 4]]", b"[ 1 , 2 , 3 , 4 ]", b"[1, 2, 3, x]", b"[1, 2, 3, NaN]",
    b"[1, 2, 3, [4]]", b"[1, 2, 3, 4, [[[]]]]", b"[1, 2, 3, 4, -1]", b"[1, 2, 3, 4, 1.5]",
]

ACTIVATIONS = [
    b'"none"', b'"relu"', b'"relu6"', b'"RELU"', b'"relu "', b'"relu\u0000"', b'"\u0072elu"',
    b'"relu6\u0000"', b'"clamp:0,6"', b'"clamp"', b'""', b'"sigmoid"', b'"nonenone"',
    b'{"clamp": [0, 6]}', b'{"clamp": [-1.5, 2.25e1]}', b'{"clamp": [6, 0]}', b'{"clamp": [0]}',
    b'{"clamp": [0, 1, 2]}', b'{"clamp": []}', b'{"clamp": ["0", 6]}', b'{"clamp": [null, 6]}',
    b'{"clamp": [true, 6]}', b'{"clamp": [[0], 6]}', b'{"clamp": 0}', b'{"clamp": "0,6"}',
    b'{"clamp": {"min": 0, "max": 6}}', b'{"clamp": [0, 6], "x": 1}',
    b'{"x": 1, "clamp": [0, 6]}', b'{"clamp": [0, 6], "clamp": [0, 6]}', b"{}",
    b'{"Clamp": [0, 6]}', b'{"\u0063lamp": [0, 6]}', b'{"clamp\u0000": [0, 6]}',
    b'{"clamp": [1e39, 0]}', b'{"clamp": [0, -1e39]}', b'{"clamp": [1e999, 0]}',
    b'{"clamp": [3.4028234663852886e38, -3.4028234663852886e38]}',
    b'{"clamp": [3.40282347e+38, -3.40282347e+38]}',
    b'{"clamp": [3.4028235677973362e38, 0]}', b'{"clamp": [3.4028235677973366e38, 0]}',
    b'{"clamp": [-3.4028235677973366e38, 0]}', b'{"clamp": [340282356779733661637539395458142568447, 0]}',
    b'{"clamp": [1e-50, -0]}', b'{"clamp": [-0.0, 0.0]}', b'{"clamp": [1.4e-45, 1e-46]}',
    b'{"clamp": [7e-46, 7.1e-46]}', b'{"clamp": [1.17549435e-38, 1.1754942e-38]}',
    b'{"clamp": [0.1, 0.30000000000000004]}', b'{"clamp": [16777217, 16777219]}',
    b'{"clamp": [1e-400, 1e-99999]}', b'{"clamp": [' + b"1" * 400 + b', 0]}',
    b'{"clamp": [0.' + b"0" * 400 + b'1, 1' + b"0" * 30 + b']}',
    b'{"clamp": [123456789012345678901234567890e-20, 9.999999999999999999999e0]}',
    b'{"clamp": [-6, -0.5]}', b'{"clamp": [NaN, 1]}', b'{"clamp": [Infinity, 1]}',
    b'{"clamp": [0, 6,]}', b'{"clamp": [0 6]}', b'{"clamp": [0, 6]', b'{"clamp" [0, 6]}',
    b'{"clamp": [0, 6]}}', b'{"clamp": [01, 6]}', b'{"clamp": [.5, 6]}', b'{"clamp": [+1, 6]}',
    b'{,}', b'{"clamp": [0, 6],}', b"null", b"true", b"0", b"[]", b'["clamp", 0, 6]',
    b'[{"clamp": [0, 6]}]',
]

STRIDES = [b"0", b"1", b"2", b"-1", b"-0", b"2.0", b"2e0", b"4611686018427387904",
           b"4611686018427387905", b'"2"', b"null", b"true", b"[2]"]

BOOLEANS = [b"true", b"false", b"1", b"0", b'"true"', b"null", b"True", b"[true]"]

SPACES = [b" ", b"\t", b"\n", b"\r", b"\r\n", b"\f", b"\v", b"\xc2\xa0", b"\xe2\x80\x80", b"\x00",
          BOM]


def generated():
    docs = {"valid": VALID, "empty": b"", "spaces only": b" \n\t\r", "valid layer": VALID_LAYER}
    for i, v in enumerate(VALUES):
        docs["top %d" % i] = v
        docs["extra %d" % i] = with_extra(v)
        docs["array %d" % i] = b"[" + v + b"]"
        for key in ("height", "dtype", "bias", "seed"):
            docs["%s %d" % (key, i)] = with_value(key, v)
        for key, _ in LAYER:
            docs["%s %d" % (key, i)] = with_layer(key, v)
        docs["padding item %d" % i] = with_layer("padding", b"[0, " + v + b", 0, 0]")
        docs["clamp bound %d" % i] = with_layer("activation", b'{"clamp": [0, ' + v + b"]}")
        docs["activation member %d" % i] = with_layer("activation", b'{"clamp": [0, 6], "x": ' + v + b"}")
    for i, v in enumerate(SIDES):
        docs["padding side %d" % i] = with_layer("padding", v)
        docs["pool_padding side %d" % i] = with_layer("pool_padding", v)
        docs["padding alone %d" % i] = VALID[:-1] + b', "padding": ' + v + b"}"
    for i, v in enumerate(ACTIVATIONS):
        docs["activation form %d" % i] = with_layer("activation", v)
        docs["activation alone %d" % i] = VALID[:-1] + b', "activation": ' + v + b"}"
    for i, v in enumerate(STRIDES):
        for key in POSITIVE_KEYS:
            docs["%s form %d" % (key, i)] = with_layer(key, v)
    for i, v in enumerate(BOOLEANS):
        docs["ceil_mode form %d" % i] = with_layer("ceil_mode", v)
        docs["residual form %d" % i] = with_layer("residual", v)
    for key, good in LAYER:
        docs["duplicate %s" % key] = VALID_LAYER[:-1] + b', "%s": %s}' % (key.encode(), good)
        docs["only %s" % key] = VALID[:-1] + b', "%s": %s}' % (key.encode(), good)
        docs["%s escaped key" % key] = VALID_LAYER.replace(
            b'"%s"' % key.encode(), b'"\\u%04x%s"' % (ord(key[0]), key[1:].encode()))
        docs["%s key with nul" % key] = VALID_LAYER.replace(
            b'"%s"' % key.encode(), b'"%s\\u0000"' % key.encode())
        if v.startswith(b'"'):
            docs["key %d" % i] = b"{" + v + b": 1, " + VALID[1:]
    for i, s in enumerate(SPACES):
        docs["space-lead %d" % i] = s + VALID
        docs["space-trail %d" % i] = VALID + s
        docs["space-inner %d" % i] = VALID.replace(b": 2,", b":" + s + b"2" + s + b",", 1)
    docs.update({
        "bom": BOM + VALID,
        "bom twice": BOM + BOM + VALID,
        "space then bom": b" " + BOM + VALID,
        "bom alone": BOM,
        "bom then space": BOM + b"\n" + VALID + b"\n",
        "utf-16 le": VALID.decode().encode("utf-16-le"),
        "utf-16 with bom": VALID.decode().encode("utf-16"),
        "duplicate known key": VALID[:-1] + b', "height": 10}',
        "duplicate unknown key": VALID[:-1] + b', "x": 1, "x": [2]}',
        "escaped known key": VALID.replace(b'"height"', b'"\\u0068eight"'),
        "known key with nul": VALID.replace(b'"height"', b'"height\\u0000"'),
        "known key surrogate": VALID.replace(b'"height"', b'"height\\ud800"'),
        "escaped dtype": with_value("dtype", b'"\\u0066loat16"'),
        "python json.dump": json.dumps({"dtype": "float16", "batch": 1, "in_channels": 2,
                                        "out_channels": 3, "height": 8, "width": 8, "filter": 3,
                                        "pool": 2, "bias": False, "note": "caf\u00e9 \U0001f600",
                                        "tags": ["a", {"b": None}], "scale": 1.5e-3}).encode(),
        "python json.dump ascii": json.dumps({"dtype": "float32", "batch": 1, "in_channels": 2,
                                              "out_channels": 3, "height": 8, "width": 8,
                                              "filter": 3, "pool": 2, "bias": True,
                                              "note": "caf\u00e9 \U0001f600 \u2028"},
                                             indent=2).encode(),
        "top level nested 5000 unclosed": b"[" * 5000,
        "extra nested 5000 unclosed": VALID[:-1] + b', "deep": ' + b"[" * 5000 + b"}",
    })
    # nesting around the limit (the top-level object counts as one level)
    for n in (MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 3 * MAX_DEPTH):
        docs["extra arrays %d" % n] = with_extra(b"[" * n + b"]" * n)
        docs["extra objects %d" % n] = with_extra(b'{"a":' * n + b"1" + b"}" * n)
        docs["extra arrays %d cut" % n] = with_extra(b"[" * n + b"]" * (n - 1))
        docs["top arrays %d" % n] = b"[" * n + b"]" * n
        docs["top arrays %d bad tail" % n] = b"[" * n + b"]" * n + b"x"
        # the layer keys' own containers count: padding's items are 2 deep,
        # activation's clamp bounds 3
        docs["padding item arrays %d" % n] = with_layer("padding", b"[" + b"[" * n + b"]" * n + b", 0, 0, 0]")
        docs["clamp bound arrays %d" % n] = with_layer("activation", b'{"clamp": [' + b"[" * n + b"]" * n + b", 6]}")
        docs["activation member objects %d" % n] = with_layer(
            "activation", b'{"clamp": [0, 6], "x": ' + b'{"a":' * n + b"1" + b"}" * n + b"}")
    return docs


def mutations(seeds, per_seed, rng):
    pieces = [b"{", b"}", b"[", b"]", b'"', b",", b":", b"0", b"1", b"-", b"e", b".", b"+",
              b"\\", b"\\u", b"\\ud800", b"\\udc00", b" ", b"\n", b"true", b"null", b"\x00",
              b"\xff", b"\xc3", b"\xa9", BOM, b"\x7f", b"\x1f", b"NaN"]
    out = {}
    for name, data in sorted(seeds.items()):
        for k in range(per_seed):
            d = bytearray(data)
            for _ in range(rng.randint(1, 3)):
                op = rng.randrange(4)
                at = rng.randint(0, len(d))
                if op == 0 and d:  # delete a byte or a few
                    del d[at:at + rng.randint(1, 4)]
                elif op == 1:  # insert a piece
                    d[at:at] = rng.choice(pieces)
                elif op == 2 and d:  # replace a byte
                    d[min(at, len(d) - 1)] = rng.randrange(256)
                else:  # duplicate a slice
                    j = rng.randint(at, min(len(d), at + 12))
                    d[at:at] = d[at:j]
            out["mutation %d of %s" % (k, name)] = bytes(d)
    return out


def run_driver(driver, documents):
    """The driver's (class, detail) of each document, fed through its stdin."""
    feed = b"".join(b"%d\n" % len(d) + d for d in documents)
    proc = subprocess.run([driver, "-"], input=feed, stdout=subprocess.PIPE, check=True)
    results = [None] * len(documents)
    for line in proc.stdout.decode("ascii").splitlines():
        cls, number, detail = line.split("\t", 2)
        results[int(number)] = (cls, detail)
    return results


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    driver, corpus = sys.argv[1], sys.argv[2]
    per_seed = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    docs = {}
    for name in sorted(os.listdir(corpus)):
        with open(os.path.join(corpus, name), "rb") as f:
            docs["corpus " + name] = f.read()
    corpus_docs = dict(docs)
    docs.update(generated())
    rng = random.Random(20240611)
    seeds = dict(corpus_docs)
    seeds.update({k: v for k, v in generated().items() if len(v) < 2000})
    docs.update(mutations({k: seeds[k] for k in sorted(seeds)[::3]}, per_seed, rng))

    names = sorted(docs)
    ours = run_driver(driver, [docs[n] for n in names])
    bad = 0
    tally = {}
    for name, result in zip(names, ours):
        data = docs[name]
        allowed, values, why = expected(data)
        cls, detail = result or ("missing", "")
        tally[cls] = tally.get(cls, 0) + 1
        if cls not in allowed or (cls == "ok" and values != detail):
            bad += 1
            print("DISAGREE: %s: parser %s (%s); python allows %s (%s); document %r" % (
                name, cls, detail, "/".join(sorted(allowed)), why, data[:160]))
    print("meta_differential: %d documents (%d corpus files, %d generated, %d mutations): %s" % (
        len(docs), len(corpus_docs), len(generated()), len(docs) - len(corpus_docs) - len(generated()),
        ", ".join("%s %d" % kv for kv in sorted(tally.items()))))
    if bad:
        print("meta_differential: %d disagreements" % bad)
        return 1
    print("meta_differential: parser and Python agree on every document")
    return 0


if __name__ == "__main__":
    # json's C scanner recurses once per nesting level: give it room, so that
    # only the syntax decides.
    sys.setrecursionlimit(1000000)
    threading.stack_size(64 * 1024 * 1024)
    result = []
    t = threading.Thread(target=lambda: result.append(main()))
    t.start()
    t.join()
    sys.exit(result[0] if result else 2)
