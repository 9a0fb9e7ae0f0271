"""Generated text-only math questions of many kinds, with exact answers: the embedded default corpus of Prism's
cluster space (``prism.corpus=default``), so that ``mmevo prism build-clusters`` runs with no download.

Over sixty kinds over eight topics (arithmetic, word problems, algebra, geometry, probability and counting, number
theory, statistics, calendar and units), each with a few phrasings and drawn numbers. Everything flows from
``random.Random(seed)``: ``generate_text_questions(n, seed)`` returns the same ``n`` distinct questions on every run,
and a shorter list is a prefix of a longer one. Answers are exact (integers, reduced fractions ``a/b``, decimals that
terminate, or ``k\\pi``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from mmevo.validation import is_integer_number

__all__ = ["KINDS", "TextQuestion", "generate_text_questions"]

NAMES = ["Ava", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hiro", "Isla", "Jonas", "Kemi", "Liam", "Maya",
         "Nikhil", "Olga", "Pablo", "Quinn", "Rosa", "Sami", "Tara", "Umar", "Vera", "Wen", "Yusuf", "Zoe"]
ITEMS = [("notebook", "notebooks"), ("pencil", "pencils"), ("apple", "apples"), ("ticket", "tickets"),
         ("sticker", "stickers"), ("cupcake", "cupcakes"), ("marker", "markers"), ("sandwich", "sandwiches")]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
PY_TRIPLES = [(3, 4, 5), (5, 12, 13), (8, 15, 17), (7, 24, 25), (20, 21, 29), (9, 40, 41), (6, 8, 10), (9, 12, 15),
              (12, 16, 20), (15, 20, 25), (10, 24, 26), (12, 35, 37), (11, 60, 61), (28, 45, 53), (33, 56, 65)]


@dataclass(frozen=True)
class TextQuestion:
    id: str  # "<kind>-<index>"
    kind: str  # e.g. "linear_equation"
    topic: str  # arithmetic | word_problem | algebra | geometry | probability | number_theory | statistics | units
    question: str
    answer: str


def _frac(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def _dec(x: Fraction) -> str:
    """A terminating decimal without trailing zeros (callers only pass such values)."""
    if x.denominator == 1:
        return str(x.numerator)
    s = f"{float(x):.6f}".rstrip("0").rstrip(".")
    return s


def _pick(rng: random.Random, *phrasings: str) -> str:
    return rng.choice(phrasings)


def _primes_below(n: int) -> int:
    return sum(all(i % d for d in range(2, int(i ** 0.5) + 1)) for i in range(2, n))


def _divisors(n: int) -> int:
    return sum(1 for d in range(1, n + 1) if n % d == 0)


# -- arithmetic ----------------------------------------------------------------------------------------------------
def _add_sub(r):
    a, b, c = r.randint(100, 9999), r.randint(100, 9999), r.randint(10, 999)
    return _pick(r, f"What is {a} + {b} - {c}?", f"Compute {a} plus {b} minus {c}.",
                 f"Evaluate {a} + {b} - {c}."), str(a + b - c)


def _multiply(r):
    a, b = r.randint(12, 999), r.randint(12, 99)
    return _pick(r, f"What is {a} times {b}?", f"Compute the product {a} × {b}.",
                 f"Multiply {a} by {b}."), str(a * b)


def _long_division(r):
    b, q = r.randint(3, 40), r.randint(10, 500)
    return _pick(r, f"What is {b * q} divided by {b}?", f"Compute {b * q} ÷ {b}."), str(q)


def _remainder(r):
    a, b = r.randint(100, 5000), r.randint(3, 30)
    return _pick(r, f"What is the remainder when {a} is divided by {b}?",
                 f"Find {a} mod {b}."), str(a % b)


def _order_of_operations(r):
    a, b, c, d = r.randint(1, 50), r.randint(2, 12), r.randint(5, 30), r.randint(1, 4)
    return _pick(r, f"Evaluate {a} + {b} × ({c} - {d}).",
                 f"What is the value of {a} + {b}({c} - {d})?"), str(a + b * (c - d))


def _fraction_add(r):
    a, b, c, d = r.randint(1, 9), r.randint(2, 12), r.randint(1, 9), r.randint(2, 12)
    x = Fraction(a, b) + Fraction(c, d)
    return _pick(r, f"What is {a}/{b} + {c}/{d}? Give the answer as a fraction in lowest terms.",
                 f"Add the fractions {a}/{b} and {c}/{d} and simplify."), _frac(x)


def _fraction_multiply(r):
    a, b, c, d = r.randint(1, 12), r.randint(2, 15), r.randint(1, 12), r.randint(2, 15)
    return _pick(r, f"What is {a}/{b} × {c}/{d} in lowest terms?",
                 f"Multiply {a}/{b} by {c}/{d} and simplify the result."), _frac(Fraction(a, b) * Fraction(c, d))


def _percent_of(r):
    p, n = r.choice([5, 10, 12, 15, 20, 25, 30, 40, 45, 60, 75, 80]), r.randint(2, 200) * 4
    return _pick(r, f"What is {p}% of {n}?", f"Find {p} percent of {n}."), _dec(Fraction(p * n, 100))


def _decimal_multiply(r):
    a, b = Fraction(r.randint(11, 99), 10), Fraction(r.randint(2, 19), 10)
    return _pick(r, f"What is {_dec(a)} × {_dec(b)}?", f"Compute {_dec(a)} times {_dec(b)}."), _dec(a * b)


def _power(r):
    a, b = r.randint(2, 12), r.randint(2, 5)
    return _pick(r, f"What is {a}^{b}?", f"Compute {a} raised to the power {b}."), str(a ** b)


def _square_root(r):
    n = r.randint(11, 99)
    return _pick(r, f"What is the square root of {n * n}?", f"Find √{n * n}."), str(n)


# -- word problems -------------------------------------------------------------------------------------------------
def _change(r):
    name, (_, items) = r.choice(NAMES), r.choice(ITEMS)
    k, price = r.randint(2, 9), r.randint(2, 15)
    bill = next(b for b in (20, 50, 100, 200) if b >= k * price)
    return (f"{name} buys {k} {items} at ${price} each and pays with a ${bill} bill. How much change, in dollars, "
            f"does {name} get back?"), str(bill - k * price)


def _distance(r):
    v, t = r.randint(30, 120), r.randint(2, 9)
    return _pick(r, f"A train travels at {v} km/h for {t} hours. How many kilometres does it cover?",
                 f"A car drives for {t} hours at a steady {v} kilometres per hour. How far does it go, in km?"), \
        str(v * t)


def _average_speed(r):
    d1, d2 = r.randint(2, 30) * 10, r.randint(2, 30) * 10
    t1, t2 = r.randint(1, 5), r.randint(1, 5)
    return (f"A cyclist rides {d1} km in {t1} hours and then {d2} km in {t2} hours. What is the average speed for "
            f"the whole trip, in km/h?"), _frac(Fraction(d1 + d2, t1 + t2))


def _work_rate(r):
    n1, n2 = r.sample(NAMES, 2)
    a, b = r.randint(2, 12), r.randint(2, 12)
    return (f"{n1} can paint a fence in {a} hours and {n2} can paint it in {b} hours. Working together, how many "
            f"hours do they need?"), _frac(Fraction(a * b, a + b))


def _ages(r):
    n1, n2 = r.sample(NAMES, 2)
    young, k, y = r.randint(3, 20), r.randint(2, 4), r.randint(2, 10)
    total = young * (k + 1) + 2 * y
    return (f"{n1} is {k} times as old as {n2}. In {y} years the sum of their ages will be {total}. How old is "
            f"{n2} now?"), str(young)


def _discount(r):
    price, d = r.randint(4, 60) * 5, r.choice([10, 20, 25, 30, 40, 50])
    return _pick(r, f"A jacket costs ${price}. It is on sale for {d}% off. What is the sale price in dollars?",
                 f"A store marks down a ${price} lamp by {d}%. What does the lamp cost now?"), \
        _dec(Fraction(price * (100 - d), 100))


def _simple_interest(r):
    p, rate, t = r.randint(5, 100) * 100, r.randint(2, 9), r.randint(2, 10)
    return (f"How much interest does ${p} earn at {rate}% simple annual interest over {t} years?"), \
        _dec(Fraction(p * rate * t, 100))


def _ratio_split(r):
    a, b, unit = r.randint(1, 9), r.randint(1, 9), r.randint(2, 12)
    while a == b:
        b = r.randint(1, 9)
    n = (a + b) * unit
    return _pick(r, f"The ratio of boys to girls in a class is {a}:{b}. If there are {n} students, how many girls "
                    f"are there?",
                 f"Red and blue beads are in the ratio {a}:{b}, and there are {n} beads in all. How many beads are "
                 f"blue?"), str(b * unit)


def _remove_from_average(r):
    k, m = r.randint(4, 12), r.randint(10, 90)
    x = r.randint(1, 2 * m)
    return (f"The average of {k} numbers is {m}. If the number {x} is removed, what is the average of the remaining "
            f"numbers?"), _frac(Fraction(k * m - x, k - 1))


def _consecutive_sum(r):
    n, start = r.choice([3, 5]), r.randint(1, 200)
    total = sum(range(start, start + n))
    word = {3: "three", 5: "five"}[n]
    return f"The sum of {word} consecutive integers is {total}. What is the largest of them?", str(start + n - 1)


def _profit(r):
    cost, margin, k = r.randint(2, 40), r.randint(1, 20), r.randint(10, 200)
    name = r.choice(NAMES)
    return (f"{name} buys lemonade cups for ${cost} each and sells them for ${cost + margin} each. How much profit, in "
            f"dollars, does {name} make by selling {k} cups?"), str(margin * k)


# -- algebra -------------------------------------------------------------------------------------------------------
def _linear_equation(r):
    a, x, b = r.randint(2, 15), r.randint(-20, 30), r.randint(-50, 50)
    sign = "+" if b >= 0 else "-"
    return _pick(r, f"Solve for x: {a}x {sign} {abs(b)} = {a * x + b}.",
                 f"Find x if {a}x {sign} {abs(b)} = {a * x + b}."), str(x)


def _system(r):
    x, y = r.randint(-10, 20), r.randint(-10, 20)
    return _pick(r, f"If x + y = {x + y} and x - y = {x - y}, what is x·y?",
                 f"Two numbers have sum {x + y} and difference {x - y} (first minus second). What is their "
                 f"product?"), str(x * y)


def _quadratic_roots(r):
    p, q = r.randint(-12, 12), r.randint(-12, 12)
    s, prod = p + q, p * q
    b = f"- {s}x" if s > 0 else (f"+ {-s}x" if s < 0 else "")
    c = f"+ {prod}" if prod > 0 else (f"- {-prod}" if prod < 0 else "")
    eq = " ".join(t for t in ("x^2", b, c) if t) + " = 0"
    if r.random() < 0.5:
        # a double root (p == q) has one solution: "the sum of the roots" is then p (the solutions) or 2p (Vieta)
        twice = ", counting the double root twice" if p == q else ""
        return f"What is the sum of the roots of {eq}{twice}?", str(s)
    return f"What is the larger root of {eq}?", str(max(p, q))


def _function_value(r):
    a, b, c, t = r.randint(1, 6), r.randint(-9, 9), r.randint(-20, 20), r.randint(-5, 6)
    return (f"If f(x) = {a}x^2 + ({b})x + ({c}), what is f({t})?"), str(a * t * t + b * t + c)


def _composition(r):
    a, b, c, d, t = r.randint(2, 5), r.randint(-6, 6), r.randint(2, 5), r.randint(-6, 6), r.randint(-4, 5)
    return (f"Let f(x) = {a}x + ({b}) and g(x) = {c}x + ({d}). What is f(g({t}))?"), str(a * (c * t + d) + b)


def _arithmetic_sequence(r):
    a, d, n = r.randint(-20, 40), r.randint(-7, 12), r.randint(10, 60)
    return _pick(r, f"The first term of an arithmetic sequence is {a} and the common difference is {d}. What is "
                    f"term number {n}?",
                 f"An arithmetic progression starts {a}, {a + d}, {a + 2 * d}, ... What is its {n}th term?"), \
        str(a + (n - 1) * d)


def _geometric_series(r):
    a, q, n = r.randint(1, 9), r.randint(2, 4), r.randint(3, 8)
    return (f"What is the sum of the first {n} terms of the geometric sequence {a}, {a * q}, {a * q * q}, ...?"), \
        str(a * (q ** n - 1) // (q - 1))


def _inequality(r):
    a, b, c = r.randint(2, 12), r.randint(0, 40), r.randint(0, 80)
    x = (c + b) // a + 1  # smallest integer with a·x - b > c
    return _pick(r, f"What is the smallest integer x such that {a}x - {b} > {c}?",
                 f"Find the least integer n with {a}n - {b} > {c}."), str(x)


def _exponent_equation(r):
    base, k = r.choice([2, 3, 5]), r.randint(2, 9)
    return _pick(r, f"Solve for x: {base}^x = {base ** k}.", f"For what x is {base} to the power x equal to "
                 f"{base ** k}?"), str(k)


def _slope(r):
    x1, y1 = r.randint(-10, 10), r.randint(-10, 10)
    x2 = x1 + r.choice([v for v in range(-8, 9) if v])
    y2 = r.randint(-10, 10)
    return _pick(r, f"What is the slope of the line through ({x1}, {y1}) and ({x2}, {y2})?",
                 f"A line passes through the points ({x1}, {y1}) and ({x2}, {y2}). Find its slope."), \
        _frac(Fraction(y2 - y1, x2 - x1))


def _absolute_value(r):
    a, b = r.randint(-20, 20), r.randint(1, 15)
    return (f"What is the sum of all solutions of |x - ({a})| = {b}?"), str(2 * a)


# -- geometry ------------------------------------------------------------------------------------------------------
def _rectangle(r):
    w, h = r.randint(2, 40), r.randint(2, 40)
    if r.random() < 0.5:
        return f"A rectangle is {w} cm long and {h} cm wide. What is its area in square centimetres?", str(w * h)
    return f"What is the perimeter of a rectangle with sides {w} m and {h} m?", str(2 * (w + h))


def _circle(r):
    rad = r.randint(2, 30)
    if r.random() < 0.5:
        return f"A circle has radius {rad}. What is its area? Express the answer in terms of pi.", f"{rad * rad}\\pi"
    return f"What is the circumference of a circle with diameter {2 * rad}? Express it in terms of pi.", \
        f"{2 * rad}\\pi"


def _triangle_angle(r):
    a, b = r.randint(20, 100), r.randint(20, 70)
    return _pick(r, f"Two angles of a triangle measure {a} and {b} degrees. What is the third angle, in degrees?",
                 f"In triangle ABC, angle A is {a}° and angle B is {b}°. Find angle C in degrees."), str(180 - a - b)


def _pythagoras(r):
    a, b, c = r.choice(PY_TRIPLES)
    k = r.randint(1, 4)
    a, b, c = a * k, b * k, c * k
    if r.random() < 0.5:
        return f"A right triangle has legs {a} and {b}. How long is its hypotenuse?", str(c)
    return f"A right triangle has hypotenuse {c} and one leg {a}. How long is the other leg?", str(b)


def _polygon_angles(r):
    n = r.randint(5, 24)
    if r.random() < 0.5:
        return f"What is the sum of the interior angles of a polygon with {n} sides, in degrees?", str(180 * (n - 2))
    return f"How many diagonals does a convex polygon with {n} sides have?", str(n * (n - 3) // 2)


def _box_volume(r):
    a, b, c = r.randint(2, 20), r.randint(2, 20), r.randint(2, 20)
    if r.random() < 0.5:
        return f"What is the volume of a box that measures {a} by {b} by {c} inches, in cubic inches?", str(a * b * c)
    return f"What is the total surface area of a {a} × {b} × {c} rectangular box?", str(2 * (a * b + b * c + a * c))


def _point_distance(r):
    a, b, c = r.choice(PY_TRIPLES)
    x, y = r.randint(-10, 10), r.randint(-10, 10)
    sx, sy = r.choice([-1, 1]), r.choice([-1, 1])
    return (f"What is the distance between the points ({x}, {y}) and ({x + sx * a}, {y + sy * b})?"), str(c)


def _similar_triangles(r):
    a, k = r.randint(2, 15), r.randint(2, 6)
    b = r.randint(2, 15)
    return (f"Two triangles are similar with ratio 1:{k}. A side of the smaller one is {a} and its area is {b}. What "
            f"is the area of the larger triangle?"), str(b * k * k)


# -- probability and counting ------------------------------------------------------------------------------------
def _dice_sum(r):
    s = r.randint(2, 12)
    ways = sum(1 for i in range(1, 7) for j in range(1, 7) if i + j == s)
    return _pick(r, f"Two fair six-sided dice are rolled. What is the probability that the sum is {s}?",
                 f"If you roll two standard dice, what is the probability their total equals {s}?"), \
        _frac(Fraction(ways, 36))


def _marbles(r):
    red, blue = r.randint(2, 12), r.randint(2, 12)
    p = Fraction(red, red + blue) * Fraction(red - 1, red + blue - 1)
    return (f"A bag holds {red} red and {blue} blue marbles. Two marbles are drawn without replacement. What is the "
            f"probability that both are red?"), _frac(p)


def _committee(r):
    n, k = r.randint(5, 20), r.randint(2, 5)
    return _pick(r, f"In how many ways can a committee of {k} be chosen from {n} people?",
                 f"How many {k}-person teams can be formed from a group of {n}?"), str(math.comb(n, k))


def _arrangements(r):
    word = r.choice(["LEVEL", "BANANA", "APPLE", "PEPPER", "LETTER", "COOKIE", "MISSISSIPPI", "BALLOON", "TOMATO",
                     "GARDEN", "PUZZLE", "COFFEE", "ORANGE", "RABBIT"])
    counts = [word.count(ch) for ch in sorted(set(word))]
    total = math.factorial(len(word))
    for c in counts:
        total //= math.factorial(c)
    return f"How many distinct arrangements of the letters of the word {word} are there?", str(total)


def _coin_flips(r):
    n = r.randint(3, 10)
    k = r.randint(0, n)
    return (f"A fair coin is flipped {n} times. What is the probability of getting exactly {k} heads?"), \
        _frac(Fraction(math.comb(n, k), 2 ** n))


def _expected_value(r):
    a, b = r.randint(1, 20), r.randint(1, 20)
    p = r.choice([Fraction(1, 2), Fraction(1, 4), Fraction(1, 3), Fraction(2, 5), Fraction(3, 10)])
    ev = p * a - (1 - p) * b
    return (f"A game pays ${a} with probability {_frac(p)} and costs you ${b} otherwise. What is the expected "
            f"winning, in dollars?"), _frac(ev)


def _handshakes(r):
    n = r.randint(4, 40)
    return _pick(r, f"{n} people at a party each shake hands with everyone else exactly once. How many handshakes "
                    f"take place?",
                 f"In a round-robin tournament with {n} teams, every pair plays once. How many games are played?"), \
        str(n * (n - 1) // 2)


# -- number theory -------------------------------------------------------------------------------------------------
def _gcd(r):
    g = r.randint(2, 30)
    a, b = g * r.randint(2, 30), g * r.randint(2, 30)
    return _pick(r, f"What is the greatest common divisor of {a} and {b}?", f"Find gcd({a}, {b})."), \
        str(math.gcd(a, b))


def _lcm(r):
    a, b = r.randint(4, 60), r.randint(4, 60)
    return _pick(r, f"What is the least common multiple of {a} and {b}?", f"Find lcm({a}, {b})."), \
        str(a * b // math.gcd(a, b))


def _divisor_count(r):
    n = r.randint(12, 500)
    return _pick(r, f"How many positive divisors does {n} have?", f"Count the positive factors of {n}."), \
        str(_divisors(n))


def _power_mod(r):
    a, b, m = r.randint(2, 15), r.randint(5, 60), r.randint(3, 13)
    return f"What is the remainder when {a}^{b} is divided by {m}?", str(pow(a, b, m))


def _digit_sum(r):
    n = r.randint(10 ** 3, 10 ** 7)
    return _pick(r, f"What is the sum of the digits of {n}?", f"Add up the digits of the number {n}."), \
        str(sum(map(int, str(n))))


def _prime_count(r):
    n = r.randint(10, 200)
    return f"How many prime numbers are less than {n}?", str(_primes_below(n))


def _last_digit(r):
    a, b = r.randint(2, 29), r.randint(10, 400)
    return _pick(r, f"What is the units digit of {a}^{b}?", f"Find the last digit of {a} to the power {b}."), \
        str(pow(a, b, 10))


def _base_conversion(r):
    n, base = r.randint(5, 500), r.choice([2, 3, 5, 8])
    digits, m = [], n
    while m:
        digits.append(str(m % base))
        m //= base
    return f"Write the number {n} in base {base}.", "".join(reversed(digits))


# -- statistics ----------------------------------------------------------------------------------------------------
def _mean(r):
    xs = [r.randint(1, 100) for _ in range(r.randint(4, 8))]
    return f"What is the mean of the numbers {', '.join(map(str, xs))}?", _frac(Fraction(sum(xs), len(xs)))


def _median(r):
    xs = [r.randint(1, 100) for _ in range(r.choice([5, 7, 9]))]
    return f"What is the median of {', '.join(map(str, xs))}?", str(sorted(xs)[len(xs) // 2])


def _range_stat(r):
    xs = [r.randint(-30, 100) for _ in range(r.randint(5, 9))]
    return f"What is the range of the data set {', '.join(map(str, xs))}?", str(max(xs) - min(xs))


# -- calendar and units --------------------------------------------------------------------------------------------
def _weekday(r):
    d, n = r.randrange(7), r.randint(10, 1000)
    return _pick(r, f"If today is {DAYS[d]}, what day of the week will it be in {n} days?",
                 f"{n} days after a {DAYS[d]}, which day of the week is it?"), DAYS[(d + n) % 7]


def _minutes(r):
    h, m = r.randint(1, 30), r.randint(1, 59)
    return f"How many minutes are there in {h} hours and {m} minutes?", str(60 * h + m)


def _unit_conversion(r):
    km, m = r.randint(1, 40), r.randint(1, 999)
    if r.random() < 0.5:
        return f"How many metres are in {km} km and {m} m?", str(1000 * km + m)
    kg, g = r.randint(1, 40), r.randint(1, 999)
    return f"A parcel weighs {kg} kg {g} g. What is its weight in grams?", str(1000 * kg + g)


def _clock_angle(r):
    h, m = r.randint(1, 12), r.choice(range(0, 60, 5))
    diff = abs(Fraction(60 * h + m, 2) % 360 - 6 * m)
    angle = min(diff, 360 - diff)
    return f"What is the smaller angle, in degrees, between the hands of a clock at {h}:{m:02d}?", _dec(angle)


KINDS: dict[str, tuple[str, Callable[[random.Random], tuple[str, str]]]] = {
    "add_sub": ("arithmetic", _add_sub), "multiply": ("arithmetic", _multiply),
    "long_division": ("arithmetic", _long_division), "remainder": ("arithmetic", _remainder),
    "order_of_operations": ("arithmetic", _order_of_operations), "fraction_add": ("arithmetic", _fraction_add),
    "fraction_multiply": ("arithmetic", _fraction_multiply), "percent_of": ("arithmetic", _percent_of),
    "decimal_multiply": ("arithmetic", _decimal_multiply), "power": ("arithmetic", _power),
    "square_root": ("arithmetic", _square_root),
    "change": ("word_problem", _change), "distance": ("word_problem", _distance),
    "average_speed": ("word_problem", _average_speed), "work_rate": ("word_problem", _work_rate),
    "ages": ("word_problem", _ages), "discount": ("word_problem", _discount),
    "simple_interest": ("word_problem", _simple_interest), "ratio_split": ("word_problem", _ratio_split),
    "remove_from_average": ("word_problem", _remove_from_average),
    "consecutive_sum": ("word_problem", _consecutive_sum), "profit": ("word_problem", _profit),
    "linear_equation": ("algebra", _linear_equation), "system": ("algebra", _system),
    "quadratic_roots": ("algebra", _quadratic_roots), "function_value": ("algebra", _function_value),
    "composition": ("algebra", _composition), "arithmetic_sequence": ("algebra", _arithmetic_sequence),
    "geometric_series": ("algebra", _geometric_series), "inequality": ("algebra", _inequality),
    "exponent_equation": ("algebra", _exponent_equation), "slope": ("algebra", _slope),
    "absolute_value": ("algebra", _absolute_value),
    "rectangle": ("geometry", _rectangle), "circle": ("geometry", _circle),
    "triangle_angle": ("geometry", _triangle_angle), "pythagoras": ("geometry", _pythagoras),
    "polygon_angles": ("geometry", _polygon_angles), "box_volume": ("geometry", _box_volume),
    "point_distance": ("geometry", _point_distance), "similar_triangles": ("geometry", _similar_triangles),
    "dice_sum": ("probability", _dice_sum), "marbles": ("probability", _marbles),
    "committee": ("probability", _committee), "arrangements": ("probability", _arrangements),
    "coin_flips": ("probability", _coin_flips), "expected_value": ("probability", _expected_value),
    "handshakes": ("probability", _handshakes),
    "gcd": ("number_theory", _gcd), "lcm": ("number_theory", _lcm), "divisor_count": ("number_theory", _divisor_count),
    "power_mod": ("number_theory", _power_mod), "digit_sum": ("number_theory", _digit_sum),
    "prime_count": ("number_theory", _prime_count), "last_digit": ("number_theory", _last_digit),
    "base_conversion": ("number_theory", _base_conversion),
    "mean": ("statistics", _mean), "median": ("statistics", _median), "range": ("statistics", _range_stat),
    "weekday": ("units", _weekday), "minutes": ("units", _minutes), "unit_conversion": ("units", _unit_conversion),
    "clock_angle": ("units", _clock_angle),
}


def generate_text_questions(n: int = 4000, seed: int = 0, kinds: list[str] | None = None) -> list[TextQuestion]:
    """``n`` distinct questions, kinds taken in turn (a kind whose draws keep repeating is retired), deterministic in
    ``seed``; a shorter list is a prefix of a longer one. ``kinds`` restricts the kinds (default: all)."""
    # 2.5 would silently give 3 questions; a numpy integer (a count read from an array) is a whole number
    if not is_integer_number(n) or n < 0:
        raise ValueError(f"n must be an integer >= 0, got {n!r}")
    if isinstance(kinds, str):  # list("gcd") would be three unknown kinds
        raise ValueError(f"kinds must be a list of kind names, got the string {kinds!r}")
    names = list(KINDS) if kinds is None else list(kinds)
    unknown = [k for k in names if k not in KINDS]
    if unknown or not names:
        raise ValueError(f"unknown question kinds {unknown}; known: {sorted(KINDS)}")
    rng = random.Random(f"mmevo-text-questions-{seed}")
    seen: set[str] = set()
    out: list[TextQuestion] = []
    misses = dict.fromkeys(names, 0)
    active = list(names)
    while len(out) < n and active:
        for kind in list(active):
            if len(out) >= n:
                break
            topic, make = KINDS[kind]
            question, answer = make(rng)
            if question in seen:
                misses[kind] += 1
                if misses[kind] > 50:  # this kind's space is exhausted
                    active.remove(kind)
                continue
            seen.add(question)
            out.append(TextQuestion(f"{kind}-{len(out)}", kind, topic, question, answer))
    if len(out) < n:
        raise ValueError(f"only {len(out)} distinct questions can be generated from kinds {names}, asked for {n}")
    return out
