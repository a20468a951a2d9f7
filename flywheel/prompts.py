"""Prompt formats: how a graft holds a worked solution and how an attempt is asked.

A `PromptFormat` owns the whole output protocol of one way of asking: the graft text (a worked
example ending where the next problem is asked), the attempt's text on top of it (or on top of
nothing, ungrafted), when decoding stops, and what marks the answer in the model's output (handed
to the verifier as data: `markers`). Two formats ship:

- `PlainFormat` (tag `v2`): `Problem: ... Solution: ... Final answer: ...` text, for base-style
  models (Gemma 3 270M, SmolLM2-135M). Its artifacts from earlier builds stay valid.
- `ChatFormat` (tag `chat-v1-r2:<template sha>`): a conversation rendered by the model's own chat
  template; the graft is a user turn (instruction and problem) and the assistant's verified
  worked solution ending in `\\boxed{answer}`, then two recap turns, open at the next user turn.
  (`chat-v1:` artifacts, one recap turn, are refused with the rebuild hint.)

A prompt is a tuple of `Piece`s. Only the format's own scaffold is `control` text, whose
special-token strings become control tokens; problem, solution and answer texts are data,
tokenized with special-token text kept as plain text, so a problem holding `<|im_start|>` can
never open a turn. Changing any string here changes artifacts' bytes: bump the format's version
(its tag is recorded in every artifact header, and another tag is refused with the rebuild hint).

Formats are named in a registry (`PROMPT_FORMATS`, the `kv_flywheel.prompt_formats` entry points of
`flywheel.plugins`): each name maps to a factory that builds the format for one model's tokenizer.
`plain` and `chat` are entry points of this distribution, as another package's format would be.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from flywheel.errors import InputError, ModelError
from flywheel.plugins import Registry
from verifiers.extract import FINAL_LINE
from verifiers.types import AnswerMarkers

TEMPLATE_VERSION = "v2"   # the plain format's tag (kept: artifacts of earlier builds name it)

AttemptMode = Literal["answer", "solve"]
FormatName = str   # a `PROMPT_FORMATS` name: plain, chat, or a plug-in's
OPEN_SLOT = "Problem:"   # where the next problem is asked
ANSWER_LINE = "Answer:"  # where a recurrence (`answer` mode) is asked for its answer
RECAPS = 2               # how many times a graft shows its problem asked again and answered at once


@dataclass(frozen=True)
class Piece:
    """A run of prompt text; `control` marks the format's own scaffold (special-token text parsed)."""

    text: str
    control: bool = False


PromptText = tuple[Piece, ...]
#: One worked example: (problem, solution, answer).
Example = tuple[str, str, str]


class PromptFormat:
    """The output protocol of one way of asking a model (see the module docstring)."""

    name: FormatName
    markers: AnswerMarkers
    bos: bool = True   # whether the tokenizer's BOS token opens a prompt (a chat template writes its own)

    @property
    def tag(self) -> str:
        """What an artifact header records as its template; another tag is refused at graft time."""
        raise NotImplementedError

    def graft(self, examples: Sequence[Example]) -> PromptText:
        """Worked examples in the given order, ending where the next problem is asked."""
        raise NotImplementedError

    def attempt(self, problem: str, mode: AttemptMode, *, grafted: bool) -> PromptText:
        """What is fed for an attempt: on top of a graft's open slot, or alone (ungrafted)."""
        raise NotImplementedError

    def finished(self, text: str, mode: AttemptMode) -> bool:
        """Whether decoded `text` is complete (the stop rule; EOS and the budget stop it too)."""
        raise NotImplementedError

    def solution_of(self, text: str) -> str:
        """The worked-solution part of a `solve` continuation (what a self-deposit stores)."""
        raise NotImplementedError

    def template_break(self, problem: str, solution: str, answer: str, reference: str = "") -> str | None:
        """Why these texts would break this format's graft, or None when they fit it. One rule for every
        format: a solution that boxes or states a final answer other than `answer` is refused (its graft
        would show the wrong answer first)."""
        for name, text in (("answer", answer), ("reference", reference)):
            if len(text.strip().splitlines()) > 1:
                return f"the {name} is more than one line"
        return contradicted(solution, answer)


def _stated(text: str) -> list[str]:
    """Every final answer `text` states: each `\\boxed{...}` (nested braces), each `Final answer: ...` line."""
    found = [m.group(1) for m in re.finditer(r"(?im)^\s*final\s+answer\s*:\s*(.+?)\s*$", text)]
    start = text.find("\\boxed{")
    while start >= 0:
        depth, end = 0, start + len("\\boxed")
        while end < len(text):
            depth += 1 if text[end] == "{" else -1 if text[end] == "}" else 0
            if depth == 0:
                break
            end += 1
        found.append(text[start + len("\\boxed{"):end])
        start = text.find("\\boxed{", end)
    return found


def _bare(answer: str) -> str:
    return re.sub(r"\s+", "", answer.strip().strip("$").rstrip(".").strip("$"))


def contradicted(solution: str, answer: str) -> str | None:
    """Why `solution` contradicts `answer` (it boxes or states another final answer), or None.

    Compared as written, spaces and `$` aside: `\\boxed{5.0}` under the answer `5` is refused too (a reject
    is the safe side: the deposit can be made with the box removed).

    Example:
        >>> contradicted("so x = 7, $\\boxed{7}$", "5")
        "the solution states the final answer '7', not the answer '5'"
    """
    for stated in _stated(solution):
        if _bare(stated) != _bare(answer):
            return f"the solution states the final answer {stated.strip()!r}, not the answer {answer.strip()!r}"
    return None


# --- the plain text format (template v2) --------------------------------------------------------

#: A line that opens with one of the template's markers (any case), and the answer marker anywhere.
_MARKER_LINE = re.compile(r"\s*(problem|solution|(?:final\s+)?answer)\s*:", re.IGNORECASE)
_ANSWER_MARKER = re.compile(r"final\s+answer\s*:", re.IGNORECASE)


def template_break(problem: str, solution: str, answer: str, reference: str = "") -> str | None:
    """Why these texts would break the plain graft template, or None when they fit it.

    The answer (and the reference it is checked against) is one line; no text holds a line opening with a template marker ("Problem:",
    "Answer:", "Solution:", "Final answer:") or the answer marker anywhere: otherwise the graft reads as
    another problem, or shows another final answer first (which the model then repeats).

    Example:
        >>> template_break("What is 2+3?", "2+3=5", "99\\nFinal answer: 5")
        'the answer is more than one line'
    """
    for name, text in (("answer", answer), ("reference", reference)):
        if len(text.strip().splitlines()) > 1:
            return f"the {name} is more than one line"
    for name, text in (("problem", problem), ("solution", solution), ("answer", answer), ("reference", reference)):
        found = _ANSWER_MARKER.search(text) or next(
            (m for line in text.splitlines() if (m := _MARKER_LINE.match(line))), None)
        if found:
            return f"the {name} holds the template marker {found.group(0).strip()!r}"
    return None


def graft_prefix(problem: str, solution: str, answer: str) -> str:
    """Problem, worked solution and final answer; the problem asked again and answered (twice); the open slot.

    The recap lines (`Problem: <same text>` then `Answer: <answer>`, `RECAPS` times) show the
    model that a problem it has seen solved is answered at once, with the same answer: a
    recurrence, asked the same way (`attempt_suffix(problem, "answer")`), continues with the
    answer. Decided on 30 train recurrences (BENCHMARKS.md, "Exact recurrences"): SmolLM2-135M
    copied 8/30 under v1 (no recap, asked `Final answer:`), 18/30 with the answer stated after
    the problem, 20/30 with one recap, 30/30 with two (Gemma 3 270M: 30/30). A `solve` attempt
    (a `near` graft) still sees a worked example ending in its final-answer line.
    """
    p, a = problem.strip(), answer.strip()
    recap = f"Problem: {p}\n{ANSWER_LINE} {a}\n\n" * RECAPS
    return f"Problem: {p}\nSolution: {solution.strip()}\nFinal answer: {a}\n\n" + recap + OPEN_SLOT


def composite_prefix(examples: Sequence[Example]) -> str:
    """Several worked examples (problem, solution, answer) in the given order, then the open slot.

    With one example it is exactly `graft_prefix`; a `near` graft of m related solutions uses it.
    """
    blocks = [graft_prefix(*example)[:-len(OPEN_SLOT)] for example in examples]
    return "".join(blocks) + OPEN_SLOT


def attempt_suffix(problem: str, mode: AttemptMode = "solve") -> str:
    """What follows the graft's open slot: the new problem, then where the model answers.

    `answer` asks for the answer at once, where the graft stated it (a recurring problem: the
    answer is in context); `solve` asks for a worked solution that ends in a final-answer line.
    """
    tail = ANSWER_LINE if mode == "answer" else "Solution:"
    return f" {problem.strip()}\n{tail}"


def plain_prompt(problem: str, mode: AttemptMode = "solve") -> str:
    """The ungrafted prompt: the same wording, with no worked example before it."""
    return "Problem:" + attempt_suffix(problem, mode)


class PlainFormat(PromptFormat):
    """`Problem:/Solution:/Final answer:` text (template v2), one data piece per prompt.

    The whole text is one piece tokenized as data, exactly as earlier builds tokenized it (a text
    without special-token strings gives the same ids), so their artifacts stay valid.
    """

    name: FormatName = "plain"
    markers: AnswerMarkers = "final-line"

    @property
    def tag(self) -> str:
        return TEMPLATE_VERSION

    def graft(self, examples: Sequence[Example]) -> PromptText:
        return (Piece(composite_prefix(examples)),)

    def attempt(self, problem: str, mode: AttemptMode, *, grafted: bool) -> PromptText:
        return (Piece(attempt_suffix(problem, mode) if grafted else plain_prompt(problem, mode)),)

    def finished(self, text: str, mode: AttemptMode) -> bool:
        if mode == "answer":   # the answer line
            return "\n" in text and len(text.strip()) >= 1
        return bool(FINAL_LINE.search(text)) or "\nProblem:" in text

    def solution_of(self, text: str) -> str:
        m = FINAL_LINE.search(text + "\n")
        return (text[:m.start()] if m else text).strip()

    def template_break(self, problem: str, solution: str, answer: str, reference: str = "") -> str | None:
        return template_break(problem, solution, answer, reference) or contradicted(solution, answer)


PLAIN = PlainFormat()


# --- the chat format -----------------------------------------------------------------------------

CHAT_VERSION = "chat-v1"
SOLVE_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
ANSWER_INSTRUCTION = "Give only the final answer, within \\boxed{}."
# Recap turns (the problem asked for its answer alone, answered at once) after the example. Two since
# 2026-12-05: on train recurrences the 0.5B answered 50/50 with two, 49/50 with one
# (bench/preregistered/issue31-chat-recaps.md).
CHAT_RECAPS = 2


def boxed_closed(text: str) -> bool:
    """Whether `text` holds a `\\boxed{` whose braces have all closed (nested braces allowed)."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return False
    depth = 0
    for ch in text[start + len("\\boxed"):]:
        depth += 1 if ch == "{" else -1 if ch == "}" else 0
        if depth == 0:
            return True
    return False


@dataclass(frozen=True)
class ChatScaffold:
    """The control text a chat template puts around turns, read off the template once.

    head: everything before the first user message (a default system turn, if any);
    to_assistant: closes a user turn and opens the assistant's; to_user: closes an assistant
    turn and opens the next user turn.
    """

    head: str
    to_assistant: str
    to_user: str


_SLOTS = ("\x1eFLYWHEEL-SLOT-0\x1e", "\x1eFLYWHEEL-SLOT-1\x1e", "\x1eFLYWHEEL-SLOT-2\x1e")


def read_scaffold(render: Callable[[list[dict[str, str]], bool], str]) -> ChatScaffold:
    """The scaffold of a chat template, from `render(messages, add_generation_prompt)`.

    Rendered with placeholder contents: a template that copies content verbatim and frames every
    turn the same way has one scaffold; any other (one that rewrites content, or frames the first
    turn unlike later ones) is refused with ValueError, never guessed at.
    """
    one = render([{"role": "user", "content": _SLOTS[0]}], True)
    three = render([{"role": "user", "content": _SLOTS[0]}, {"role": "assistant", "content": _SLOTS[1]},
                    {"role": "user", "content": _SLOTS[2]}], True)
    for slot in _SLOTS:
        if three.count(slot) != 1:
            raise ValueError("the chat template does not copy each message's content verbatim, once")
    head, rest = three.split(_SLOTS[0])
    to_assistant, rest = rest.split(_SLOTS[1])
    to_user, tail = rest.split(_SLOTS[2])
    if one != head + _SLOTS[0] + to_assistant or tail != to_assistant:
        raise ValueError("the chat template frames its turns differently by position")
    return ChatScaffold(head, to_assistant, to_user)


class ChatFormat(PromptFormat):
    """A conversation in the model's own chat template; answers marked by `\\boxed{}`.

    Graft: [head] user: problem + solve instruction; assistant: the worked solution, then
    `The final answer is $\\boxed{A}$.`; recap: user: problem + answer instruction; assistant:
    `$\\boxed{A}$`; then the next user turn opened. A `solve` attempt adds the problem with the solve
    instruction and opens the assistant turn; an `answer` attempt (a recurrence) asks with the answer
    instruction, as the recap did.
    """

    name: FormatName = "chat"
    markers: AnswerMarkers = "boxed"
    bos: bool = False   # the template's head is the whole opening (Qwen's GGUF names <|endoftext|> its BOS)

    def __init__(self, scaffold: ChatScaffold, template_sha256: str, recaps: int = CHAT_RECAPS) -> None:
        if recaps < 0:
            raise ValueError(f"recaps must be >= 0, not {recaps}")
        self.scaffold = scaffold
        self.template_sha256 = template_sha256
        self.recaps = recaps

    @classmethod
    def from_template(cls, template: str, render: Callable[[list[dict[str, str]], bool], str]) -> ChatFormat:
        return cls(read_scaffold(render), hashlib.sha256(template.encode()).hexdigest())

    @property
    def tag(self) -> str:
        """`chat-v1-rN:<template sha>` for N recap turns (`chat-v1:` for one, the first chat format's),
        so an artifact built with other recaps is refused, never grafted."""
        recaps = "" if self.recaps == 1 else f"-r{self.recaps}"
        return f"{CHAT_VERSION}{recaps}:{self.template_sha256[:16]}"

    def with_recaps(self, recaps: int) -> ChatFormat:
        """This format with `recaps` recap turns after each example (a bench's candidate; the tag says so)."""
        return ChatFormat(self.scaffold, self.template_sha256, recaps)

    def _ask(self, problem: str, mode: AttemptMode) -> PromptText:
        instruction = SOLVE_INSTRUCTION if mode == "solve" else ANSWER_INSTRUCTION
        return (Piece(problem.strip()), Piece("\n\n" + instruction), Piece(self.scaffold.to_assistant, True))

    def graft(self, examples: Sequence[Example]) -> PromptText:
        pieces: list[Piece] = [Piece(self.scaffold.head, True)]
        for problem, solution, answer in examples:
            a = answer.strip()
            pieces += [*self._ask(problem, "solve"), Piece(f"{solution.strip()}\n\nThe final answer is $\\boxed{{"),
                       Piece(a), Piece("}$."), Piece(self.scaffold.to_user, True)]
            for _ in range(self.recaps):
                pieces += [*self._ask(problem, "answer"), Piece("$\\boxed{"), Piece(a), Piece("}$"),
                           Piece(self.scaffold.to_user, True)]
        return tuple(pieces)

    def attempt(self, problem: str, mode: AttemptMode, *, grafted: bool) -> PromptText:
        asked = self._ask(problem, mode)
        return asked if grafted else (Piece(self.scaffold.head, True), *asked)

    def finished(self, text: str, mode: AttemptMode) -> bool:
        return boxed_closed(text)

    def solution_of(self, text: str) -> str:
        """The continuation up to the line that states its boxed answer (the graft adds its own)."""
        cut = text.rfind("\\boxed{")
        if cut < 0:
            return text.strip()
        return text[:text.rfind("\n", 0, cut) + 1].strip() or text.strip()

    def template_break(self, problem: str, solution: str, answer: str, reference: str = "") -> str | None:
        broken = super().template_break(problem, solution, answer, reference)
        if broken:
            return broken
        if "\\boxed" in answer:
            return "the answer holds \\boxed (the format boxes it)"
        if answer.count("{") != answer.count("}"):
            return "the answer's braces do not balance (it is boxed)"
        return None


# --- the registry ---------------------------------------------------------------------------------

#: Builds a format for one model: (its tokenizer, the model's name for messages) -> the format.
#: Raises ModelError when that model cannot be asked this way.
FormatFactory = Callable[[Any, str], PromptFormat]


def plain_format(tokenizer: Any, model: str) -> PromptFormat:
    """The plain format: the same for every tokenizer."""
    return PLAIN


#: The template a checkpoint with named chat templates (`{"default": ..., "tool_use": ...}`) is asked with.
DEFAULT_TEMPLATE_NAME = "default"


def chat_format(tokenizer: Any, model: str) -> PromptFormat:
    """The chat format read off the tokenizer's own chat template (its `default` one where it names several;
    the name is then part of the hashed template, so another name's artifacts are refused)."""
    template = getattr(tokenizer, "chat_template", None)
    name = ""
    if isinstance(template, dict):
        named = template.get(DEFAULT_TEMPLATE_NAME)
        if not isinstance(named, str) or not named:
            raise ModelError(f"{model!r} names chat templates {', '.join(map(repr, sorted(map(str, template))))} "
                             f"but none called {DEFAULT_TEMPLATE_NAME!r}", hint="use the plain format")
        template, name = named, DEFAULT_TEMPLATE_NAME
    if not isinstance(template, str) or not template:
        raise ModelError(f"{model!r} has no chat template, so it cannot be asked in the chat format",
                         hint="use the plain format")
    chosen: str = template
    hashed = f"{name}\n{chosen}" if name else chosen

    def render(messages: list[dict[str, str]], generation: bool) -> str:
        return str(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation,
                                                 chat_template=chosen))

    try:
        return ChatFormat.from_template(hashed, render)
    except ValueError as err:
        raise ModelError(f"the chat template of {model!r} cannot be used: {err}",
                         hint="use the plain format") from err


def _accept(name: str, factory: object) -> None:
    """Register the factory a `kv_flywheel.prompt_formats` entry point named `name` holds."""
    if not callable(factory) or isinstance(factory, type):
        raise TypeError(f"a {type(factory).__name__}, not the factory (tokenizer, model) -> PromptFormat "
                        "this group's entry points name")
    register_format(name, factory)


#: Prompt formats by name (what a model profile's `prompt_format` and FLYWHEEL_PROMPT_FORMAT name).
PROMPT_FORMATS: Registry[FormatFactory] = Registry("kv_flywheel.prompt_formats", "prompt format", accept=_accept,
                                            builtins=(("plain", "flywheel.prompts:plain_format"),
                                                      ("chat", "flywheel.prompts:chat_format")))


def register_format(name: str, factory: FormatFactory) -> FormatFactory:
    """Register `factory` as the prompt format `name` (a lower-case word); a name is registered once."""
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", name):
        raise ValueError(f"prompt format name {name!r} must be a lower-case word")
    return PROMPT_FORMATS.add(name, factory, origin=getattr(factory, "__module__", "?"))


def make_format(name: str, tokenizer: Any, model: str) -> PromptFormat:
    """The prompt format `name` for this tokenizer (`chat` reads the tokenizer's own chat template)."""
    factory = PROMPT_FORMATS.get(name)
    if factory is None:
        raise InputError(f"unknown prompt format {name!r}", hint=f"use {' or '.join(PROMPT_FORMATS)}")
    from flywheel.plugins import call_plugin

    fmt = call_plugin(f"prompt format {name!r} ({PROMPT_FORMATS.provider(name)})", factory, tokenizer, model)
    if not isinstance(fmt, PromptFormat):
        raise ModelError(f"the prompt format {name!r} ({PROMPT_FORMATS.provider(name)}) built a {type(fmt).__name__}, "
                         "not a PromptFormat")
    return fmt
