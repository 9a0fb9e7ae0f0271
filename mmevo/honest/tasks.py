"""HONEST procedural text tasks: arithmetic, modular arithmetic and logic at difficulty 1-5, with exact answers.

Every task carries ``meta = {domain, difficulty, expression}``. ``expression`` is a small Python-syntax expression
(integers, ``+ - * % **``, ``pow(a, e, m)``, comparisons, ``and / or / not``) whose value *is* the answer, so a
verifier (``recompute_answer``) can re-derive the gold answer from the metadata alone. Later pieces build on that:
a mutator rewrites the numbers of an expression and recomputes the answer, a curriculum asks for a domain at a given
difficulty (``generate_task``).

Generation is deterministic: task ``index`` of a stream is drawn from ``random.Random`` seeded with the stream's
seed, domain, difficulty and index only, so the same arguments give the same tasks on every run and machine, and a
shorter list is a prefix of a longer one. The generator computes each answer while it builds the expression tree;
the verifier parses the rendered expression text with ``ast`` instead, so the two paths check each other (a
rendering bug, e.g. a missing pair of parentheses, shows up as a disagreement).

Answers are integers (``"-17"``) or ``"True"`` / ``"False"``.
"""

from __future__ import annotations

import ast
import hashlib
import random
from dataclasses import dataclass
from collections.abc import Callable, Sequence

from mmevo.validation import is_integer_number

__all__ = ["generated_problem_id", "DOMAINS", "MIN_DIFFICULTY", "MAX_DIFFICULTY", "HonestTask", "generate_task", "generate_tasks",
           "split_honest_tasks", "evaluate_expression", "format_answer", "recompute_answer", "verify_task"]

DOMAINS = ("arithmetic", "modular", "logic")
MIN_DIFFICULTY, MAX_DIFFICULTY = 1, 5


@dataclass(frozen=True)
class HonestTask:
    id: str  # "<stream>-<domain>-d<difficulty>-<index>"
    question: str  # the user text: the problem and the form of the answer (the protocol is in the system prompt)
    answer: str  # exact gold answer: an integer or True / False
    domain: str  # arithmetic | modular | logic
    difficulty: int  # 1 (easiest) .. 5
    expression: str  # Python-syntax expression whose value is the answer (see evaluate_expression)

    @property
    def meta(self) -> dict:
        return {"domain": self.domain, "difficulty": self.difficulty, "expression": self.expression}

    def to_example(self):
        """The trainer's ``Example`` (text only: no images, no choices, no worked solution)."""
        from mmevo.data.schema import Example

        return Example(id=self.id, problem=self.question, answer=self.answer, choices=[], images=[],
                       solution=None, meta=self.meta)


# ------------------------------------------------------------------------------------------------ expression trees
# A node is an int leaf or (op, left, right) / ("not", x) / ("pow3", a, e, m). The generator evaluates nodes with
# `_value` and renders them twice: as Python (the meta expression) and for the question text.

_PREC = {"or": 1, "and": 2, "not": 3, "cmp": 4, "+": 5, "-": 5, "*": 6, "%": 6, "**": 8}
_CMP = ("<", ">", "==", "!=", "<=", ">=")
_SHOW = {"*": "×", "%": "mod", "**": "^", "and": "AND", "or": "OR", "not": "NOT", "!=": "≠", "<=": "≤", ">=": "≥",
         "==": "="}


def _op_class(op: str) -> str:
    return "cmp" if op in _CMP else op


def _value(node):
    if isinstance(node, (int, bool)):
        return node
    op = node[0]
    if op == "not":
        return not _value(node[1])
    if op == "pow3":
        return pow(_value(node[1]), _value(node[2]), _value(node[3]))
    a, b = _value(node[1]), _value(node[2])
    if op == "and":
        return a and b
    if op == "or":
        return a or b
    return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "%": lambda: a % b, "**": lambda: a ** b,
            "<": lambda: a < b, ">": lambda: a > b, "==": lambda: a == b, "!=": lambda: a != b,
            "<=": lambda: a <= b, ">=": lambda: a >= b}[op]()


def _needs_parens(parent: str, child, is_right: bool) -> bool:
    """Whether ``child`` must be bracketed under ``parent`` for Python to read the rendered text as this tree.

    Besides what precedence requires, comparisons, negations and a different connective under ``and`` / ``or``
    are bracketed for readability (and Python never sees a chained comparison)."""
    if isinstance(child, (int, bool)) or child[0] == "pow3":
        return False
    p, c = _op_class(parent), _op_class(child[0])
    if p == "%" or c == "%":  # "(87 × 52) mod 15" and "(47 mod 32) + 13": mod has no agreed precedence for a
        return True  # reader, and in Python it shares ×'s level: a * (b % m * c) is not a * b % m * c
    if p in ("and", "or"):
        return c != p
    if p == "cmp":
        return _PREC[c] <= _PREC["cmp"]
    if _PREC[c] != _PREC[p]:  # arithmetic
        return _PREC[c] < _PREC[p]
    if p == "**" or not is_right:  # ** is bracketed both ways; the rest associate to the left
        return p == "**"
    return not ((c == p and p in ("+", "*")) or (p == "+" and c == "-"))  # a + (b - c) = a + b - c; a - (b + c) not


def _render(node, python: bool) -> str:
    """The tree as text: Python syntax (``python=True``, the meta expression) or for the question (× mod ^ AND)."""
    if isinstance(node, bool):
        return str(node)
    if isinstance(node, int):
        return str(node) if node >= 0 else f"({node})"
    op = node[0]
    if op == "pow3":
        if python:
            return "pow({}, {}, {})".format(*(_render(x, python) for x in node[1:]))
        # "a^e mod m" reads right only with each compound part bracketed: "(2 + 1)^3 mod 5", not "2 + 1^3 mod 5"
        a, e, m = (_render(x, python) if isinstance(x, (int, bool)) else f"({_render(x, python)})" for x in node[1:])
        return f"{a}^{e} mod {m}"
    if op == "not":
        inner = _render(node[1], python)
        if not isinstance(node[1], (int, bool)):
            inner = f"({inner})"
        return f"not {inner}" if python else f"NOT {inner}"

    def side(child, is_right: bool) -> str:
        s = _render(child, python)
        # the question's "a^e mod m" has no brackets of its own: "(2^3 mod 5)^2", never "2^3 mod 5^2"
        nested_pow3 = not python and not isinstance(child, (int, bool)) and child[0] == "pow3"
        return f"({s})" if nested_pow3 or _needs_parens(op, child, is_right) else s

    left, right = side(node[1], False), side(node[2], True)
    if op == "**" and not python:
        return f"{left}^{right}"
    return f"{left} {op if python else _SHOW.get(op, op)} {right}"


def _random_tree(rng: random.Random, n_ops: int, leaf: Callable[[], int], ops: Sequence[str]):
    """A random binary tree with ``n_ops`` operators from ``ops`` over leaves drawn by ``leaf``."""
    if n_ops == 0:
        return leaf()
    k = rng.randint(0, n_ops - 1)  # operators in the left subtree
    return (rng.choice(ops), _random_tree(rng, k, leaf, ops), _random_tree(rng, n_ops - 1 - k, leaf, ops))


# --------------------------------------------------------------------------------------------------------- domains
# Each builder returns an expression tree; the answer is _value(tree).

_ARITH_LEVELS = {  # difficulty -> (operators in the tree, leaf range, operator set)
    1: (1, (1, 50), ("+", "-")),
    2: (2, (1, 20), ("+", "-", "*")),
    3: (3, (2, 30), ("+", "-", "*")),
    4: (4, (-20, 50), ("+", "-", "*")),
    5: (5, (-50, 99), ("+", "-", "*")),
}


def _arithmetic(rng: random.Random, d: int):
    n_ops, (lo, hi), ops = _ARITH_LEVELS[d]
    tree = _random_tree(rng, n_ops, lambda: rng.randint(lo, hi), ops)
    if d == 5:  # one leaf squared: a power inside a longer expression
        tree = (rng.choice(("+", "-")), tree, ("**", rng.randint(2, 15), 2))
    return tree


def _modular(rng: random.Random, d: int):
    r = rng.randint
    if d == 1:
        tree = ("%", r(10, 99), r(2, 9))
    elif d == 2:
        tree = ("%", ("+", r(10, 99), r(10, 99)), r(3, 12))
    elif d == 3:
        tree = ("%", ("*", r(10, 99), r(10, 99)), r(5, 20))
    elif d == 4:
        tree = ("%", ("+", ("*", r(100, 999), r(100, 999)), r(10, 99)), r(7, 31))
    else:
        tree = ("pow3", r(2, 50), r(10, 99), r(7, 50))
    return tree


def _comparison(rng: random.Random, d: int):
    """One comparison; from difficulty 4 its sides are small sums / products."""
    if d >= 4:
        ops = ("+", "-") if d == 4 else ("+", "-", "*")

        def side():
            return _random_tree(rng, rng.randint(0, 1), lambda: rng.randint(1, 30), ops)
        a, b = side(), side()
    else:
        a, b = rng.randint(0, 99), rng.randint(0, 99)
    if rng.random() < 0.2:  # equality tests that hold need equal sides now and then
        b = a
    return (rng.choice(_CMP), a, b)


def _logic(rng: random.Random, d: int):
    n_cmp = {1: 1, 2: 2, 3: 3, 4: 3, 5: 4}[d]
    leaves = [_comparison(rng, d) for _ in range(n_cmp)]
    if d >= 3:  # negate one comparison
        i = rng.randrange(n_cmp)
        leaves[i] = ("not", leaves[i])
    it = iter(leaves)
    tree = _random_tree(rng, n_cmp - 1, lambda: next(it), ("and", "or"))
    if d == 5 and rng.random() < 0.5:
        tree = ("not", tree)
    return tree


_BUILDERS = {"arithmetic": _arithmetic, "modular": _modular, "logic": _logic}
_QUESTION = {"arithmetic": "Compute {expr}. Give the exact integer.",
             "modular": "Compute {expr}. Give the remainder, an integer from 0 to the modulus minus 1.",
             "logic": "Is this statement true or false: {expr}? Answer True or False."}


def generate_task(domain: str, difficulty: int, seed: int = 0, index: int = 0, stream: str = "train") -> HonestTask:
    """Task ``index`` of ``(stream, seed, domain, difficulty)``; the same arguments always give the same task."""
    if domain not in _BUILDERS:
        raise ValueError(f"unknown HONEST task domain {domain!r}; known: {list(DOMAINS)}")
    if not is_integer_number(difficulty) or \
            not MIN_DIFFICULTY <= difficulty <= MAX_DIFFICULTY:
        raise ValueError(f"difficulty must be an integer in [{MIN_DIFFICULTY}, {MAX_DIFFICULTY}], got {difficulty!r}")
    difficulty = int(difficulty)  # a numpy integer is one too; the task (and its JSON meta) holds a plain int
    rng = random.Random(f"honest/{stream}/{seed}/{domain}/{difficulty}/{index}")  # str seeds hash with sha512
    tree = _BUILDERS[domain](rng, difficulty)
    value = _value(tree)
    question = _QUESTION[domain].format(expr=_render(tree, python=False))
    return HonestTask(id=f"{stream}-{domain}-d{difficulty}-{index}", question=question, answer=format_answer(value),
                      domain=domain, difficulty=difficulty, expression=_render(tree, python=True))


def _grid(domains: Sequence[str], min_difficulty: int, max_difficulty: int) -> list[tuple[str, int]]:
    domains = list(domains)
    if not domains:
        raise ValueError("HONEST tasks need at least one domain")
    unknown = [d for d in domains if d not in _BUILDERS]
    if unknown:
        raise ValueError(f"unknown HONEST task domains {unknown}; known: {list(DOMAINS)}")
    if not MIN_DIFFICULTY <= min_difficulty <= max_difficulty <= MAX_DIFFICULTY:
        raise ValueError(f"need {MIN_DIFFICULTY} <= min_difficulty <= max_difficulty <= {MAX_DIFFICULTY}, got "
                         f"{min_difficulty}, {max_difficulty}")
    return [(dom, d) for d in range(min_difficulty, max_difficulty + 1) for dom in domains]


def generate_tasks(n: int, seed: int = 0, domains: Sequence[str] = DOMAINS, min_difficulty: int = MIN_DIFFICULTY,
                   max_difficulty: int = MAX_DIFFICULTY, stream: str = "train") -> list[HonestTask]:
    """``n`` tasks cycling over every (difficulty, domain) pair in range, so each is equally represented."""
    grid = _grid(domains, min_difficulty, max_difficulty)
    return [generate_task(*grid[i % len(grid)], seed=seed, index=i, stream=stream) for i in range(n)]


def split_honest_tasks(n_train: int, n_heldout: int, seed: int = 0, domains: Sequence[str] = DOMAINS,
                       min_difficulty: int = MIN_DIFFICULTY, max_difficulty: int = MAX_DIFFICULTY,
                       ) -> tuple[list[HonestTask], list[HonestTask]]:
    """Train and held-out tasks from disjoint streams; held-out questions that also occur in train are skipped."""
    train = generate_tasks(n_train, seed, domains, min_difficulty, max_difficulty, stream="train")
    grid = _grid(domains, min_difficulty, max_difficulty)
    seen = {t.question for t in train}
    held: list[HonestTask] = []
    budget = 100 * n_heldout + 1000
    i = 0
    while len(held) < n_heldout:
        if i >= budget:
            raise ValueError(f"only {len(held)} of {n_heldout} held-out HONEST tasks differ from the {n_train} train "
                             f"tasks for domains {list(domains)}, difficulty {min_difficulty}-{max_difficulty}: "
                             "ask for fewer, or widen the range")
        t = generate_task(*grid[i % len(grid)], seed=seed, index=i, stream="heldout")
        i += 1
        if t.question not in seen:
            seen.add(t.question)
            held.append(t)
    return train, held


# -------------------------------------------------------------------------------------------------------- verifier
MAX_EXPRESSION_CHARS = 4000
MAX_POW_EXPONENT = 64  # a ** b
MAX_MODPOW_EXPONENT = 10 ** 6  # pow(a, e, m)
MAX_MAGNITUDE = 10 ** 60  # any intermediate integer

_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.Mod: lambda a, b: a % b, ast.Pow: lambda a, b: a ** b}
_CMPOPS = {ast.Lt: lambda a, b: a < b, ast.Gt: lambda a, b: a > b, ast.LtE: lambda a, b: a <= b,
           ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def evaluate_expression(expression: str) -> int | bool:
    """Value of a task expression, parsed with ``ast`` and evaluated over a whitelist; never runs arbitrary code.

    Allowed: integer / True / False literals, unary ``-``, ``+ - * % **`` on integers, ``pow(a, e, m)``, one
    comparison per node (no chains), ``and`` / ``or`` / ``not`` on booleans; a modulus (``%``, ``pow``) is >= 1;
    every integer, literal or computed, at most ``MAX_MAGNITUDE`` in size. Anything else raises ValueError.
    """
    if not isinstance(expression, str) or not expression.strip():
        raise ValueError(f"expression must be a non-empty string, got {expression!r}")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
        return _eval(tree.body, expression)
    except SyntaxError as e:
        raise ValueError(f"expression {expression!r} is not valid syntax: {e.msg}") from None
    except RecursionError:  # "-" * 3000 + "1", a 2000-term sum: within the length limit, too deep to walk
        raise ValueError(f"expression {expression[:40]!r}... is nested too deeply") from None


def _eval(node: ast.AST, src: str) -> int | bool:
    def fail(why: str):
        raise ValueError(f"expression {src!r}: {why}")

    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool):
            return node.value
        if _is_int(node.value):  # a literal is an integer like any other: "9" * 3999 or a 0x... literal gave an
            if abs(node.value) > MAX_MAGNITUDE:  # answer of thousands of digits (past 4300, one str() cannot write)
                fail(f"literal of {node.value.bit_length()} bits: larger than the limit of intermediate values")
            return node.value
        fail(f"literal {node.value!r:.60} is not an integer or True/False")
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, src)
        if isinstance(node.op, ast.USub) and _is_int(v):
            return -v
        if isinstance(node.op, ast.Not) and isinstance(v, bool):
            return not v
        fail(f"unary {type(node.op).__name__} on {type(v).__name__}")
    if isinstance(node, ast.BinOp):
        if type(node.op) not in _BINOPS:
            fail(f"operator {type(node.op).__name__} is not allowed")
        a, b = _eval(node.left, src), _eval(node.right, src)
        if not (_is_int(a) and _is_int(b)):
            fail(f"{type(node.op).__name__} needs integers, got {a!r} and {b!r}")
        if isinstance(node.op, ast.Mod) and b < 1:  # Python's 7 % -3 = -2 is no remainder "from 0 to m - 1"
            fail(f"modulus {b} is not >= 1")
        if isinstance(node.op, ast.Pow) and not 0 <= b <= MAX_POW_EXPONENT:
            fail(f"exponent {b} outside [0, {MAX_POW_EXPONENT}]")
        out = _BINOPS[type(node.op)](a, b)
        if abs(out) > MAX_MAGNITUDE:
            fail("intermediate value too large")
        return out
    if isinstance(node, ast.BoolOp):
        vals = [_eval(v, src) for v in node.values]
        if not all(isinstance(v, bool) for v in vals):
            fail(f"{type(node.op).__name__.lower()} needs True/False operands, got {vals!r}")
        return all(vals) if isinstance(node.op, ast.And) else any(vals)
    if isinstance(node, ast.Compare):
        if len(node.ops) != 1 or type(node.ops[0]) not in _CMPOPS:
            fail("only single comparisons < > <= >= == != are allowed")
        a, b = _eval(node.left, src), _eval(node.comparators[0], src)
        same_kind = (_is_int(a) and _is_int(b)) or (isinstance(a, bool) and isinstance(b, bool)
                                                   and isinstance(node.ops[0], (ast.Eq, ast.NotEq)))
        if not same_kind:
            fail(f"cannot compare {a!r} and {b!r} with {type(node.ops[0]).__name__}")
        return _CMPOPS[type(node.ops[0])](a, b)
    if isinstance(node, ast.Call):
        if not (isinstance(node.func, ast.Name) and node.func.id == "pow" and len(node.args) == 3
                and not node.keywords):
            fail("the only call allowed is pow(a, e, m)")
        a, e, m = (_eval(x, src) for x in node.args)
        if not all(_is_int(x) for x in (a, e, m)) or m < 1 or not 0 <= e <= MAX_MODPOW_EXPONENT:
            fail(f"pow needs integers with 0 <= e <= {MAX_MODPOW_EXPONENT} and m >= 1, got {a!r}, {e!r}, {m!r}")
        return pow(a, e, m)
    fail(f"{type(node).__name__} is not allowed")


def format_answer(value: int | bool) -> str:
    """The answer text of a value: ``"True"`` / ``"False"`` or the integer."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if _is_int(value):
        return str(value)
    raise ValueError(f"task values are integers or booleans, got {value!r}")


def recompute_answer(meta: dict) -> str:
    """The gold answer re-derived from ``meta["expression"]`` alone (the verifier)."""
    if not isinstance(meta, dict) or "expression" not in meta:
        raise ValueError(f"task meta has no 'expression': {meta!r}")
    return format_answer(evaluate_expression(meta["expression"]))


def verify_task(task: HonestTask) -> bool:
    """True iff the stored answer equals the verifier's recomputation from the task's expression."""
    try:
        return recompute_answer(task.meta) == task.answer
    except ValueError:
        return False


def generated_problem_id(question: str) -> str:
    """The id of a GSS-generated problem: its question, as the solver sees it ("2+3" and "(2 + 3)" are one problem;
    an older mmevo hashed the expression's text, so replay slots it checkpointed are re-keyed on resume)."""
    return "gss-" + hashlib.sha1(question.encode()).hexdigest()[:16]
