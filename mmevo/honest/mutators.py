"""SMC mutators (seed 4.2): turn an HONEST task of difficulty d into a harder one of difficulty d + 1 whose gold
answer is still exact and verifiable.

- ``numeric_mutator`` (4.2.1): every integer literal times one per-problem prime s in {7, 11, ..., 97}; exponents
  (the right operand of ``**``, the ``e`` of ``pow(a, e, m)``) are kept, since scaling them leaves the verifier's
  bounds (exponent <= 64) at once. The answer is re-evaluated: a comparison of sums keeps its truth value, one with
  a product on a side may not (2 * 5 <= 30 - 7 at s = 53 is 28090 <= 1219).
- ``compositional_mutator`` (4.2.2): chains two same-domain tasks of the same difficulty: "Let X = <P1>. <P2 with one
  of its numbers (arithmetic, modular) or comparisons (logic) replaced by X>". Never substitutes an exponent or a
  modulus (a 0 there would be an invalid problem).
- ``distractor_mutator`` (4.2.3): prepends irrelevant but plausible prose (three snippets of a 50-snippet pool);
  the expression and the answer stay the same.

Every mutator is ``mutator(task, rng, partner=None) -> HonestTask`` (``partner()`` draws another task of the same
domain and difficulty; only the compositional mutator calls it) and may raise ValueError when it cannot apply.

Answers are never copied from the parent: a mutator works on the expression tree, computes the answer from the new
tree, and renders the tree to the task's Python expression; ``checked_mutation`` then has the verifier
(``tasks.recompute_answer``) re-derive the answer from the rendered text. The two paths check each other, as in the
generator.

A mutated task is a :class:`MutatedTask`: besides the inlined ``expression`` (what the verifier reads) it keeps the
question's structure (distractor prose, ``Let X = ...`` bindings, the main body with variable names), so that
mutations compose: a numeric mutation of a compositional task scales the numbers of every binding and keeps the
prose. Difficulties above the generator's 5 exist only as chains of mutations of difficulty-5 tasks (seed 4.1: the
ceiling is capped at 8 "to avoid pathological mutator chains"), built by ``mmevo.honest.curriculum``.
"""

from __future__ import annotations

import ast
import random
from dataclasses import dataclass
from collections.abc import Callable

from mmevo.honest.tasks import _CMP, _QUESTION, _render, _value, HonestTask, format_answer, verify_task

__all__ = ["PRIMES", "DISTRACTORS", "MutatedTask", "Var", "expression_tree", "numeric_mutator",
           "compositional_mutator", "distractor_mutator", "MUTATORS", "checked_mutation"]

PRIMES = (7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97)  # seed: s in {7..97}
_NAMES = "XYZWVUTSRQPONMLKJIHGFEDCBA"  # binding names, in the order they are given out


@dataclass(frozen=True)
class MutatedTask(HonestTask):
    """An ``HonestTask`` made by mutators. ``expression`` is the fully inlined expression (what the verifier
    evaluates); ``body`` and ``bindings`` are the same problem with named intermediate values, as the question shows
    it, and ``preface`` the distractor prose before it."""

    preface: str = ""  # distractor prose shown before the problem ("" when none)
    bindings: tuple = ()  # ((name, python expression that may use earlier names), ...), in dependency order
    body: str = ""  # the main python expression, may use the binding names
    mutations: tuple = ()  # names of the mutators applied, oldest first


class Var(int):
    """A named leaf of an expression tree (a compositional binding). It renders as its name in both the Python and
    the question text (``tasks._render`` prints int leaves with ``str``) and must be inlined before evaluation."""

    def __new__(cls, name: str):
        obj = super().__new__(cls, 0)
        obj.name = name
        return obj

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__


# ------------------------------------------------------------------------------------------------- tree plumbing
# A tree is tasks.py's: an int / bool / Var leaf, (op, left, right), ("not", x) or ("pow3", a, e, m).
_AST_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Mod: "%", ast.Pow: "**"}
_AST_CMPOPS = {ast.Lt: "<", ast.Gt: ">", ast.Eq: "==", ast.NotEq: "!=", ast.LtE: "<=", ast.GtE: ">="}


def expression_tree(expression: str, names: frozenset | set = frozenset()):
    """The tree of a task expression (the ``tasks`` grammar; ``names`` may appear as variables). ValueError else."""
    try:
        root = ast.parse(expression.strip(), mode="eval").body
    except SyntaxError as e:
        raise ValueError(f"expression {expression!r} is not valid syntax: {e.msg}") from None
    except RecursionError:  # "-" * 3999 + "1": the parser itself gives up building the tree
        raise ValueError(f"expression {expression[:40]!r}... is nested too deeply to parse") from None

    def conv(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, bool)):
            return node.value
        if isinstance(node, ast.Name) and node.id in names:
            return Var(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
                and type(node.operand.value) is int:
            return -node.operand.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):  # -(a + b) is 0 - (a + b): the tree
            return ("-", 0, conv(node.operand))  # has no negation, and Python's -a ** 2 is -(a ** 2), 0 - a^2
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return ("not", conv(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in _AST_BINOPS:
            return (_AST_BINOPS[type(node.op)], conv(node.left), conv(node.right))
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _AST_CMPOPS:
            return (_AST_CMPOPS[type(node.ops[0])], conv(node.left), conv(node.comparators[0]))
        if isinstance(node, ast.BoolOp):  # a and b and c -> ((a and b) and c): renders back the same
            op = "and" if isinstance(node.op, ast.And) else "or"
            out = conv(node.values[0])
            for v in node.values[1:]:
                out = (op, out, conv(v))
            return out
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "pow" \
                and len(node.args) == 3 and not node.keywords:
            return ("pow3", *(conv(a) for a in node.args))
        raise ValueError(f"expression {expression!r}: {ast.dump(node)[:80]} is outside the task grammar")

    try:
        return conv(root)
    except RecursionError:  # within the verifier's length limit, too deep to walk
        raise ValueError(f"expression {expression[:40]!r}... is nested too deeply") from None


def _is_leaf(node) -> bool:
    return not isinstance(node, tuple)


def _map_leaves(node, fn, exponent: bool = False):
    """``fn(leaf, is_exponent)`` applied to every leaf (is_exponent: right of ``**`` or the e of ``pow3``)."""
    if _is_leaf(node):
        return fn(node, exponent)
    op = node[0]
    if op == "**":
        return (op, _map_leaves(node[1], fn), _map_leaves(node[2], fn, True))
    if op == "pow3":
        return (op, _map_leaves(node[1], fn), _map_leaves(node[2], fn, True), _map_leaves(node[3], fn))
    return (op, *(_map_leaves(c, fn) for c in node[1:]))


def _substitutable(node, want_bool: bool, path: tuple = ()) -> list[tuple]:
    """Paths of the nodes a compositional binding may replace: integer leaves that are not an exponent or a modulus
    (``want_bool=False``), or comparisons (``want_bool=True``); never an existing variable."""
    if _is_leaf(node):
        ok = not want_bool and type(node) is int
        return [path] if ok else []
    op = node[0]
    if want_bool and op in _CMP:
        return [path]
    if op == "**":
        kids = (1,)  # not the exponent
    elif op == "pow3":
        kids = (1,)  # not the exponent, not the modulus
    elif op == "%":
        kids = (1,)  # not the modulus
    else:
        kids = tuple(range(1, len(node)))
    return [p for i in kids for p in _substitutable(node[i], want_bool, path + (i,))]


def _replace(node, path: tuple, new):
    if not path:
        return new
    i = path[0]
    return node[:i] + (_replace(node[i], path[1:], new),) + node[i + 1:]


def _inline(node, bindings: dict):
    """The tree with every variable replaced by its (inlined) binding tree."""
    if isinstance(node, Var):
        if node.name not in bindings:
            raise ValueError(f"variable {node.name} has no binding")
        return _inline(bindings[node.name], bindings)
    if _is_leaf(node):
        return node
    return (node[0], *(_inline(c, bindings) for c in node[1:]))


def _rename(node, mapping: dict):
    if isinstance(node, Var):
        return Var(mapping.get(node.name, node.name))
    if _is_leaf(node):
        return node
    return (node[0], *(_rename(c, mapping) for c in node[1:]))


# ---------------------------------------------------------------------------------------------------- programs
@dataclass
class _Program:
    """A task as a structure: prose, named bindings (in order) and a body; what every mutator rewrites."""

    preface: str
    bindings: list  # [(name, tree)]
    body: object  # tree
    mutations: tuple

    def inlined(self):
        return _inline(self.body, dict(self.bindings))


def _program(task: HonestTask) -> _Program:
    if isinstance(task, MutatedTask):
        names: set[str] = set()
        bindings = []
        for name, text in task.bindings:
            bindings.append((name, expression_tree(text, frozenset(names))))
            names.add(name)
        return _Program(task.preface, bindings, expression_tree(task.body, frozenset(names)), task.mutations)
    return _Program("", [], expression_tree(task.expression), ())


def _task(parent: HonestTask, prog: _Program, mutation: str) -> MutatedTask:
    """The task of ``prog`` at the parent's difficulty + 1; its answer is computed from the new inlined tree."""
    full = prog.inlined()
    value = _value(full)  # ZeroDivisionError / TypeError on a broken tree: the caller's retry handles it
    lets = []
    for name, tree in prog.bindings:
        shown = _render(tree, python=False)
        is_bool = isinstance(_value(_inline(tree, dict(prog.bindings))), bool)
        lets.append(f"Let {name} be the truth value of {shown}." if is_bool else f"Let {name} = {shown}.")
    question = " ".join([*([prog.preface] if prog.preface else []), *lets,
                         _QUESTION[parent.domain].format(expr=_render(prog.body, python=False))])
    return MutatedTask(id=f"{parent.id}+{mutation}", question=question, answer=format_answer(value),
                       domain=parent.domain, difficulty=parent.difficulty + 1, expression=_render(full, python=True),
                       preface=prog.preface,
                       bindings=tuple((n, _render(t, python=True)) for n, t in prog.bindings),
                       body=_render(prog.body, python=True), mutations=prog.mutations + (mutation,))


# ---------------------------------------------------------------------------------------------------- mutators
def numeric_mutator(task: HonestTask, rng: random.Random, partner: Callable[[], HonestTask] | None = None
                    ) -> MutatedTask:
    """Every integer literal (not exponents) times one prime s drawn from ``PRIMES`` (seed 4.2.1)."""
    s = rng.choice(PRIMES)
    prog = _program(task)

    def scale(leaf, is_exponent):
        return leaf * s if type(leaf) is int and not is_exponent else leaf

    prog.bindings = [(n, _map_leaves(t, scale)) for n, t in prog.bindings]
    prog.body = _map_leaves(prog.body, scale)
    return _task(task, prog, "numeric")


def compositional_mutator(task: HonestTask, rng: random.Random, partner: Callable[[], HonestTask] | None = None
                          ) -> MutatedTask:
    """P2 = ``task``, P1 = ``partner()`` (same domain and difficulty): one number (or, in logic, one comparison) of
    P2's body or of one of its bindings becomes a variable bound to P1's value (seed 4.2.2). P1's own bindings and
    prose come along."""
    if partner is None:
        raise ValueError("the compositional mutator needs a partner task of the same domain and difficulty")
    other = partner()
    if (other.domain, other.difficulty) != (task.domain, task.difficulty):
        raise ValueError(f"partner is {other.domain} d{other.difficulty}, need {task.domain} d{task.difficulty}")
    p2, p1 = _program(task), _program(other)
    want_bool = isinstance(_value(p1.inlined()), bool)
    # where X may go: a spot in the body or in one of P2's bindings (-1: the body, i: binding i)
    spots = [(-1, p) for p in _substitutable(p2.body, want_bool)]
    spots += [(i, p) for i, (_, t) in enumerate(p2.bindings) for p in _substitutable(t, want_bool)]
    if not spots:
        raise ValueError(f"task {task.id} has no {'comparison' if want_bool else 'number'} to replace")
    used = {n for n, _ in p2.bindings}
    free = [n for n in _NAMES if n not in used]
    if len(free) <= len(p1.bindings):
        raise ValueError("out of variable names")
    rename = {n: free[i] for i, (n, _) in enumerate(p1.bindings)}  # P1's names move out of P2's way
    name = free[len(p1.bindings)]  # the name of P1's value
    where, path = rng.choice(spots)
    body, p2_bindings = p2.body, list(p2.bindings)
    if where < 0:
        body = _replace(body, path, Var(name))
    else:
        p2_bindings[where] = (p2_bindings[where][0], _replace(p2_bindings[where][1], path, Var(name)))
    # P1's bindings and its value come first: every binding only uses names bound before it
    p1_bindings = [(rename[n], _rename(t, rename)) for n, t in p1.bindings] + [(name, _rename(p1.body, rename))]
    prog = _Program(" ".join(p for p in (p1.preface, p2.preface) if p), p1_bindings + p2_bindings, body,
                    p2.mutations)
    return _task(task, prog, "compositional")


DISTRACTORS = (  # irrelevant but plausible context (seed 4.2.3: a 50-snippet pool)
    "Yesterday Alice baked 12 cookies and gave 5 of them to her neighbour.",
    "The library on Elm Street opens at 9 in the morning and closes at 6 in the evening.",
    "A train left the station at 7:15 carrying 240 passengers toward the coast.",
    "Marco planted 3 rows of tomatoes, each with 8 plants, behind his garage.",
    "The school choir has 27 members, and 11 of them sing soprano.",
    "On Saturday the bakery sold 64 loaves of rye bread before noon.",
    "Priya's bicycle has 21 gears, but she mostly rides in the seventh.",
    "A small aquarium holds 35 litres of water and 9 striped fish.",
    "The museum received 4 new paintings last month, all of them landscapes.",
    "Tom's grandmother keeps 14 jars of plum jam in the cellar.",
    "The football match was delayed by 25 minutes because of heavy rain.",
    "A recipe for pancakes calls for 2 eggs, 300 millilitres of milk and a pinch of salt.",
    "The hiking trail climbs 480 metres over a distance of 6 kilometres.",
    "Nina read 3 chapters of her novel on the bus to work.",
    "The parking garage has 5 levels with 60 spaces on each level.",
    "A florist arranged 18 roses and 7 lilies into a single bouquet.",
    "The town's clock tower was built in 1887 and repaired in 1954.",
    "Jamal's chess club meets every Thursday in room 12.",
    "A farmer counted 43 sheep in the upper meadow this morning.",
    "The conference hall seats 350 people, and 90 seats were reserved for students.",
    "Lena bought a scarf for 15 euros and a pair of gloves for 22 euros.",
    "The ferry crosses the lake 8 times a day during the summer.",
    "A tortoise at the zoo is believed to be 96 years old.",
    "The printer in the office jams roughly once every 200 pages.",
    "Sam's playlist contains 57 songs, most of them from the 1980s.",
    "The bridge over the river is 1.2 kilometres long and has 4 lanes.",
    "A bakery in the old town uses 30 kilograms of flour every morning.",
    "The orchestra rehearsed the second movement 6 times before lunch.",
    "Ahmed collects stamps and owns 312 of them from 40 different countries.",
    "The elevator in the tower can carry at most 13 people at once.",
    "A group of 9 friends shared 3 large pizzas after the concert.",
    "The pharmacy restocks its shelves every 10 days.",
    "Clara's cat sleeps about 16 hours a day, usually on the windowsill.",
    "The marathon route passes 5 bridges and 2 public parks.",
    "A carpenter cut a 240-centimetre plank into pieces of equal length.",
    "The weather station recorded 11 millimetres of rain on Tuesday.",
    "Ivan's vegetable soup simmers for 45 minutes before it is served.",
    "The gym offers 19 classes per week, including 4 yoga sessions.",
    "A box of crayons contains 24 colours, two of them metallic.",
    "The harbour was visited by 7 cruise ships in the month of May.",
    "Mia practises the violin for 40 minutes every evening.",
    "The train from the capital arrives at platform 3 at 14:05.",
    "A beekeeper harvested 28 kilograms of honey from 5 hives.",
    "The village fair has 16 stalls selling food and 10 selling crafts.",
    "Oliver's grandfather repairs old radios in a shed behind the house.",
    "The swimming pool is 25 metres long and 2 metres deep at one end.",
    "A courier delivered 73 parcels before his lunch break.",
    "The chess tournament lasted 5 rounds and had 32 players.",
    "Rosa painted her kitchen walls pale green over 2 weekends.",
    "The observatory's telescope has a mirror 80 centimetres across.",
)
_DISTRACTOR_SNIPPETS = 3  # snippets per distractor mutation (~60-100 tokens of prose)


def distractor_mutator(task: HonestTask, rng: random.Random, partner: Callable[[], HonestTask] | None = None
                       ) -> MutatedTask:
    """Three distinct snippets not already in the question, prepended to it; expression and answer unchanged
    (seed 4.2.3)."""
    prog = _program(task)
    fresh = [s for s in DISTRACTORS if s not in task.question]
    if len(fresh) < _DISTRACTOR_SNIPPETS:
        raise ValueError(f"the distractor pool is used up (task {task.id} holds most of it)")
    prog.preface = " ".join([*rng.sample(fresh, _DISTRACTOR_SNIPPETS), *([prog.preface] if prog.preface else [])])
    return _task(task, prog, "distractor")


MUTATORS: dict[str, Callable] = {"numeric": numeric_mutator, "compositional": compositional_mutator,
                                 "distractor": distractor_mutator}


def checked_mutation(mutator: Callable, task: HonestTask, rng: random.Random,
                     partner: Callable[[], HonestTask] | None = None) -> tuple[HonestTask | None, str | None]:
    """(mutated task, None) when the mutation is verifiable, else (None, why). Never raises for a failing mutator.

    Verifiable: the verifier's recomputation from the new expression equals the stored answer, the difficulty is one
    above the parent's, the domain is the parent's, and the question changed."""
    try:
        child = mutator(task, rng, partner)
    except Exception as e:  # a mutator that cannot apply (or a buggy one) is a dropped mutation, never a crash
        return None, f"{type(e).__name__}: {e}"[:200]
    if not isinstance(child, HonestTask):
        return None, f"mutator returned {type(child).__name__}, not an HonestTask"
    if not verify_task(child):
        return None, f"unverifiable: stored answer {child.answer!r} differs from the verifier's (or no value)"
    if child.domain != task.domain or child.difficulty != task.difficulty + 1:
        return None, (f"mutated {task.domain} d{task.difficulty} into {child.domain} d{child.difficulty}, "
                      f"need {task.domain} d{task.difficulty + 1}")
    if child.question == task.question:
        return None, "the mutation left the question unchanged"
    return child, None
