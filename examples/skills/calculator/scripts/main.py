"""Evaluate an arithmetic expression read as JSON from stdin."""
import ast
import json
import math
import operator
import sys

BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod, ast.Pow: operator.pow,
}
UNOPS = {ast.UAdd: operator.pos, ast.USub: operator.neg}
FUNCS = {
    name: getattr(math, name)
    for name in ("sqrt", "sin", "cos", "tan", "asin", "acos", "atan", "log", "log10", "log2", "exp", "floor", "ceil", "factorial", "gcd")
}
FUNCS.update(abs=abs, round=round, min=min, max=max)
CONSTS = {"pi": math.pi, "e": math.e, "tau": math.tau}


class CalcError(Exception):
    pass


def ev(node):
    if isinstance(node, ast.Expression):
        return ev(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in BINOPS:
        left, right = ev(node.left), ev(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 10000:
            raise CalcError("exponent too large")
        return BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in UNOPS:
        return UNOPS[type(node.op)](ev(node.operand))
    if isinstance(node, ast.Name) and node.id in CONSTS:
        return CONSTS[node.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCS and not node.keywords:
        return FUNCS[node.func.id](*[ev(a) for a in node.args])
    raise CalcError("unsupported syntax: " + type(node).__name__)


def main():
    req = json.load(sys.stdin)
    expr = req["expression"]
    precision = req.get("precision", 15)
    try:
        value = ev(ast.parse(expr, mode="eval"))
    except (CalcError, SyntaxError, ZeroDivisionError, ValueError, OverflowError, TypeError) as exc:
        json.dump({"expression": expr, "error": str(exc)}, sys.stdout)
        print(f"calculator: {exc}", file=sys.stderr)
        return 1
    if isinstance(value, float):
        value = float(f"{value:.{precision}g}")
        if value.is_integer() and abs(value) < 2**53:
            value = int(value)
    json.dump({"expression": expr, "result": value}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
