"""The associativity checker on every case of issue 4 item 2, positive and negative."""

import functools
import subprocess
import sys
from pathlib import Path

import lit_fork
import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import arith, builtin, func, math
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from tinyopt.passes.loop_rewrites.associativity import (
    NUMERIC,
    CheckAssocPass,
    StepError,
    StepFunction,
    Verdict,
    check_associative,
    step_functions,
)

TINYOPT = str(Path(sys.executable).parent / "tinyopt")

CASES = {
    "sum": """
func.func @sum(%s: f32, %x: f32) -> f32 attributes {tinyopt.init = [0.0 : f32]} {
  %r = arith.addf %s, %x : f32
  func.return %r : f32
}""",
    "product": """
func.func @product(%s: f32, %x: f32) -> f32 attributes {tinyopt.init = [1.0 : f32]} {
  %r = arith.mulf %x, %s : f32
  func.return %r : f32
}""",
    "max": """
func.func @max(%s: f32, %x: f32) -> f32 attributes {tinyopt.init = [0xFF800000 : f32]} {
  %r = arith.maximumf %s, %x : f32
  func.return %r : f32
}""",
    "min": """
func.func @min(%s: f32, %x: f32) -> f32 attributes {tinyopt.init = [0x7F800000 : f32]} {
  %r = arith.minimumf %s, %x : f32
  func.return %r : f32
}""",
    "argmax": """
func.func @argmax(%m: f32, %i: f32, %v: f32, %j: f32) -> (f32, f32)
    attributes {tinyopt.init = [0xFF800000 : f32, -1.0 : f32]} {
  %c = arith.cmpf ogt, %v, %m : f32
  %nm = arith.select %c, %v, %m : f32
  %ni = arith.select %c, %j, %i : f32
  func.return %nm, %ni : f32, f32
}""",
    "logsumexp": """
func.func @logsumexp(%s: f32, %x: f32) -> f32 attributes {tinyopt.init = [0xFF800000 : f32]} {
  %m = arith.maximumf %s, %x : f32
  %ds = arith.subf %s, %m : f32
  %dx = arith.subf %x, %m : f32
  %es = math.exp %ds : f32
  %ex = math.exp %dx : f32
  %t = arith.addf %es, %ex : f32
  %lg = math.log %t : f32
  %r = arith.addf %lg, %m : f32
  func.return %r : f32
}""",
    "online_softmax": """
func.func @online_softmax(%m: f32, %l: f32, %x: f32) -> (f32, f32)
    attributes {tinyopt.init = [0xFF800000 : f32, 0.0 : f32]} {
  %nm = arith.maximumf %m, %x : f32
  %d = arith.subf %m, %nm : f32
  %e = math.exp %d : f32
  %sl = arith.mulf %l, %e : f32
  %dx = arith.subf %x, %nm : f32
  %ex = math.exp %dx : f32
  %nl = arith.addf %sl, %ex : f32
  func.return %nm, %nl : f32, f32
}""",
    "welford": """
func.func @welford(%n: f32, %mean: f32, %m2: f32, %x: f32) -> (f32, f32, f32)
    attributes {tinyopt.init = [0.0 : f32, 0.0 : f32, 0.0 : f32]} {
  %one = arith.constant 1.0 : f32
  %n1 = arith.addf %n, %one : f32
  %d = arith.subf %x, %mean : f32
  %q = arith.divf %d, %n1 : f32
  %mean1 = arith.addf %mean, %q : f32
  %d2 = arith.subf %x, %mean1 : f32
  %p = arith.mulf %d, %d2 : f32
  %m21 = arith.addf %m2, %p : f32
  func.return %n1, %mean1, %m21 : f32, f32, f32
}""",
    "attention": """
func.func @attention(%m: f32, %l: f32, %o0: f32, %o1: f32, %score: f32, %v0: f32, %v1: f32)
    -> (f32, f32, f32, f32)
    attributes {tinyopt.init = [0xFF800000 : f32, 0.0 : f32, 0.0 : f32, 0.0 : f32]} {
  %nm = arith.maximumf %m, %score : f32
  %d = arith.subf %m, %nm : f32
  %a = math.exp %d : f32
  %ds = arith.subf %score, %nm : f32
  %p = math.exp %ds : f32
  %la = arith.mulf %l, %a : f32
  %nl = arith.addf %la, %p : f32
  %o0a = arith.mulf %o0, %a : f32
  %pv0 = arith.mulf %p, %v0 : f32
  %no0 = arith.addf %o0a, %pv0 : f32
  %o1a = arith.mulf %o1, %a : f32
  %pv1 = arith.mulf %p, %v1 : f32
  %no1 = arith.addf %o1a, %pv1 : f32
  func.return %nm, %nl, %no0, %no1 : f32, f32, f32, f32
}""",
    "affine": """
func.func @affine(%s: f32, %x: f32) -> f32 attributes {tinyopt.init = [1.0 : f32]} {
  %a = arith.constant 0.9 : f32
  %b = arith.constant -2.5 : f32
  %as = arith.mulf %a, %s : f32
  %bx = arith.mulf %b, %x : f32
  %r = arith.addf %as, %bx : f32
  func.return %r : f32
}""",
    "average": """
func.func @average(%s: f32, %x: f32) -> f32 attributes {tinyopt.init = [0.0 : f32]} {
  %two = arith.constant 2.0 : f32
  %t = arith.addf %s, %x : f32
  %r = arith.divf %t, %two : f32
  func.return %r : f32
}""",
    "max_affine": """
func.func @max_affine(%s: f32, %x: f32) -> f32 attributes {tinyopt.init = [0.0 : f32]} {
  %h = arith.constant 0.5 : f32
  %m = arith.maximumf %s, %x : f32
  %hm = arith.mulf %h, %m : f32
  %r = arith.addf %hm, %x : f32
  func.return %r : f32
}""",
    "subtracted": """
func.func @subtracted(%s: f32, %x: f32) -> f32 attributes {tinyopt.init = [0.0 : f32]} {
  %r = arith.subf %s, %x : f32
  func.return %r : f32
}""",
    "square": """
func.func @square(%s: f32, %x: f32) -> f32 attributes {tinyopt.init = [0.0 : f32]} {
  %q = arith.mulf %s, %s : f32
  %r = arith.addf %q, %x : f32
  func.return %r : f32
}""",
    "sine": """
func.func @sine(%s: f32, %x: f32) -> f32 attributes {tinyopt.init = [0.0 : f32]} {
  %q = math.sin %s : f32
  %r = arith.addf %q, %x : f32
  func.return %r : f32
}""",
}

POSITIVE = {
    "sum": "componentwise sum: s = s_a + s_b",
    "product": "componentwise product: s = s_a * s_b",
    "max": "componentwise max: s = max(s_a, s_b)",
    "min": "componentwise min: s = min(s_a, s_b)",
    "argmax": "f(a, b): m = m_b > m_a ? m_b : m_a, i = m_b > m_a ? i_b : i_a",
    "logsumexp": "f(a, b): s = log(",
    "online_softmax": "online-softmax rescaling with running maximum m: m = max(m_a, m_b)",
    "welford": "Welford's parallel merge of (count, mean, M2) = (n, mean, m2)",
    "attention": "online-softmax rescaling with running maximum m: m = max(m_a, m_b)",
    "affine": "affine maps s ↦ p·s + q: each element gives p = 0.9, q = -2.5 * x",
    "average": "affine maps s ↦ p·s + q: each element gives p = 0.5, q = x * 0.5",
    "subtracted": "affine maps s ↦ p·s + q: each element gives p = 1, q = x * -1",
    "max_affine": "max-affine maps s ↦ max(c·s + d, e) (c ≥ 0): each element gives c = 0.5, "
    "d = x, e = (x * 0.5) + x",
}

NEGATIVE = {
    "square": (
        "not associative: counterexample A=[-2] B=[-2]: fold(A++B) = 2 but "
        "merge(fold(A), fold(B)) = 14\n"
        "  since B'=[0, -2] has fold(B') = fold(B) = -2 and fold(A++B') = 14, no merge of the "
        "states can give both\n"
        "  the maps s ↦ f(s, x): arith.mulf of a state-dependent value leaves the affine and "
        "max-affine maps"
    ),
    "sine": (
        "not associative: counterexample A=[-2] B=[-2]: fold(A++B) = -2.9093 but "
        "merge(fold(A), fold(B)) = -2.78907\n"
        "  since B'=[0, -2] has fold(B') = fold(B) = -2 and fold(A++B') = -2.78907, no merge "
        "of the states can give both\n"
        "  the maps s ↦ f(s, x): math.sin of a state-dependent value leaves the affine and "
        "max-affine maps"
    ),
}


def parse(text: str) -> ModuleOp:
    """Parse MLIR text holding func/arith/math ops."""
    ctx = Context()
    for dialect in (builtin.Builtin, func.Func, arith.Arith, math.Math):
        ctx.load_dialect(dialect)
    module = Parser(ctx, text).parse_module()
    module.verify()
    return module


@functools.cache
def verdict(case: str) -> Verdict:
    """Check the step function of one case, once a process: the tests of a case share it (one
    parallel worker runs them, tests/conftest.py's `SHARING`)."""
    (step,) = step_functions(parse(CASES[case]))
    return check_associative(step)


def run_ir(function: func.FuncOp, args: list[float]) -> list[float]:
    """Evaluate an emitted merge/lift/apply function in float64."""
    as_step = StepFunction(function, 0, ())
    with np.errstate(all="ignore"):
        return [float(v) for v in as_step.apply(NUMERIC, [], [np.float64(a) for a in args])]


@pytest.mark.parametrize("case", sorted(POSITIVE))
def test_positive_cases_derive_a_merge(case: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Each secretly associative fold gets a merge, described in words and emitted as IR."""
    result = verdict(case)
    print(result.report())
    printed = capsys.readouterr().out
    assert printed.startswith(f"@{case}: associative: merge = ")
    assert POSITIVE[case] in printed, printed
    assert result.merge_ir and f"func.func @{case}_merge(" in printed
    for function in result.merge_ir:
        function.verify()


@pytest.mark.parametrize("case", sorted(NEGATIVE))
def test_negative_cases_print_a_counterexample(
    case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`s·s + x` and `sin(s) + x` are refuted with chunks A, B, B' and the differing results."""
    result = verdict(case)
    print(result.report())
    printed = capsys.readouterr().out
    assert not result.associative and not result.merge_ir
    assert printed == f"@{case}: {NEGATIVE[case]}\n"


@pytest.mark.parametrize("case", sorted(NEGATIVE))
def test_counterexample_is_real(case: str) -> None:
    """The printed chunks really fold as printed: B and B' agree, A++B and A++B' do not."""
    (step_func,) = step_functions(parse(CASES[case]))
    step = StepFunction.from_func(step_func)
    cex = verdict(case).counterexample
    assert cex is not None and cex.b_prime is not None
    with np.errstate(all="ignore"):
        assert step.final(cex.b) == step.final(cex.b_prime)
        assert step.final(cex.a + cex.b) == cex.fold_ab
        assert step.final(cex.a + cex.b_prime) == cex.merged
    assert cex.fold_ab != cex.merged


@pytest.mark.parametrize("case", ["welford", "attention", "online_softmax", "argmax"])
def test_emitted_state_merge_matches_the_fold(case: str) -> None:
    """The emitted `@f_merge` IR on two chunks' folds gives the fold of their concatenation."""
    (step_func,) = step_functions(parse(CASES[case]))
    step = StepFunction.from_func(step_func)
    (merge,) = verdict(case).merge_ir
    rng = np.random.default_rng(1)
    for _ in range(20):
        a, b = (
            [tuple(rng.normal(size=step.n_elem) * 3) for _ in range(rng.integers(1, 6))]
            for _ in range(2)
        )
        with np.errstate(all="ignore"):
            expected = step.final(a + b)
            got = run_ir(merge, [*step.final(a), *step.final(b)])
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("case", ["affine", "average", "max_affine"])
def test_emitted_map_reduction_matches_the_fold(case: str) -> None:
    """`@f_lift`, `@f_merge` (from its identity) and `@f_apply` reproduce the sequential fold."""
    (step_func,) = step_functions(parse(CASES[case]))
    step = StepFunction.from_func(step_func)
    lift, merge, apply = verdict(case).merge_ir
    identity = [float(v.value.data) for v in merge.attributes["tinyopt.identity"]]
    rng = np.random.default_rng(2)
    for _ in range(20):
        chunk = [(float(v),) for v in rng.normal(size=rng.integers(1, 9)) * 3]
        params = identity
        for x in chunk:
            params = run_ir(merge, [*params, *run_ir(lift, list(x))])
        with np.errstate(all="ignore"):
            expected = step.final(chunk)
        np.testing.assert_allclose(run_ir(apply, params), expected, rtol=1e-9, atol=1e-12)


def test_tuple_state_without_merge_reports_a_candidate_counterexample() -> None:
    """A tuple state with no fitting template names the templates it tried."""
    text = """
func.func @pair(%a: f32, %b: f32, %x: f32) -> (f32, f32)
    attributes {tinyopt.init = [0.0 : f32, 0.0 : f32]} {
  %q = arith.mulf %a, %b : f32
  %r = arith.addf %q, %x : f32
  func.return %r, %a : f32, f32
}"""
    (step,) = step_functions(parse(text))
    result = check_associative(step)
    assert not result.associative
    assert "not associative: counterexample A=[" in result.summary()
    assert "map families are only derived for a scalar state" in result.summary()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "func.func @f(%s: f32) -> f32 attributes {tinyopt.init = [0.0 : f32]} {\n"
            "  func.return %s : f32\n}",
            "arguments must be the state (the result types, in order) followed by at least one",
        ),
        (
            "func.func @f(%s: f32, %x: f32) -> f32 attributes {tinyopt.init = [0.0 : f32, 1.0 : "
            "f32]} {\n  %r = arith.addf %s, %x : f32\n  func.return %r : f32\n}",
            "tinyopt.init has 2 values but the state has 1",
        ),
        (
            "func.func @f(%s: f32, %x: f32) -> f32 attributes {tinyopt.init = [0 : i32]} {\n"
            "  %r = arith.addf %s, %x : f32\n  func.return %r : f32\n}",
            "tinyopt.init must be an array of float attributes",
        ),
        (
            "func.func @f(%s: f32, %x: f32) -> f32 attributes {tinyopt.init = [0.0 : f32]} {\n"
            "  %r = math.floor %x : f32\n  func.return %r : f32\n}",
            "unsupported op 'math.floor'",
        ),
    ],
)
def test_bad_step_functions_are_named(text: str, message: str) -> None:
    """A function that is not a step function gets a `StepError` saying why."""
    (step,) = step_functions(parse(text))
    with pytest.raises(StepError, match="step function @f: ") as info:
        check_associative(step)
    assert message in str(info.value)


def test_pass_annotates_and_adds_merges() -> None:
    """`check-assoc` sets `tinyopt.assoc` and inserts the merge functions after each step."""
    module = parse(CASES["sum"] + CASES["sine"])
    CheckAssocPass().apply(Context(), module)
    names = [op.sym_name.data for op in module.ops if isinstance(op, func.FuncOp)]
    assert names == ["sum", "sum_merge", "sine"]
    sum_func, _, sine_func = module.ops
    assert sum_func.attributes["tinyopt.assoc"].data == (
        "associative: merge = componentwise sum: s = s_a + s_b"
    )
    assert sine_func.attributes["tinyopt.assoc"].data.startswith(
        "not associative: counterexample A=[-2] B=[-2]"
    )
    module.verify()


def tinyopt(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the tinyopt command and capture its output (forked from a server that has imported
    tinyopt, tests/lit_fork.py, as tests/test_cli.py's; the real script where it cannot run)."""
    folder = lit_fork.shared()
    script = str(Path(folder) / "tinyopt") if folder is not None else TINYOPT
    return subprocess.run([script, *args], capture_output=True, text=True)


def test_cli_exit_status(tmp_path: Path) -> None:
    """`tinyopt check-assoc` exits 0 when every fold has a merge, 1 when one does not."""
    good = tmp_path / "good.mlir"
    good.write_text(CASES["sum"] + CASES["welford"])
    bad = tmp_path / "bad.mlir"
    bad.write_text(CASES["max_affine"] + CASES["square"])
    result = tinyopt("check-assoc", str(good))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(": associative: merge = ") == 2
    result = tinyopt("check-assoc", str(bad))
    assert result.returncode == 1
    assert "@max_affine: associative" in result.stdout
    assert "@square: not associative: counterexample A=[-2] B=[-2]" in result.stdout
    assert result.stderr == ""


def test_cli_diagnostics(tmp_path: Path) -> None:
    """No step function, or a bad one, is a one-line error with exit status 1."""
    empty = tmp_path / "empty.mlir"
    empty.write_text("builtin.module {}\n")
    result = tinyopt("check-assoc", str(empty))
    assert result.returncode == 1
    assert result.stderr == (
        f"tinyopt: error: {empty} has no step function (a func.func with a tinyopt.init "
        "attribute)\n"
    )
    floor = tmp_path / "floor.mlir"
    floor.write_text(
        "func.func @f(%s: f32, %x: f32) -> f32 attributes {tinyopt.init = [0.0 : f32]} {\n"
        "  %r = math.floor %x : f32\n  func.return %r : f32\n}\n"
    )
    result = tinyopt("check-assoc", str(floor))
    assert result.returncode == 1
    assert result.stderr == "tinyopt: error: step function @f: unsupported op 'math.floor'\n"
