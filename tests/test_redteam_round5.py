"""Red-team round five (issue 56): each class's reproduction, fixed. The reproductions themselves stay with
the planners; these tests pin the class."""

from __future__ import annotations

import copy

import pytest

from flywheel.engine import Engine
from flywheel.errors import ModelError
from flywheel.prompts import ChatFormat, chat_format


def test_named_chat_templates_use_the_default_and_hash_its_name(tiny_qwen: Engine) -> None:
    """Class 9: a checkpoint shipping `{"default": ..., "tool_use": ...}` was refused as having no template."""
    tok = copy.deepcopy(tiny_qwen.tokenizer)
    plain = chat_format(tok, "tiny")
    tok.chat_template = {"default": tiny_qwen.tokenizer.chat_template, "tool_use": "{{ messages }}"}
    named = chat_format(tok, "tiny")
    assert isinstance(named, ChatFormat) and isinstance(plain, ChatFormat)
    assert named.scaffold == plain.scaffold                     # asked exactly as with the plain template
    assert named.template_sha256 != plain.template_sha256       # but the name is in its hash (another tag)
    tok.chat_template = {"tool_use": "{{ messages }}"}
    with pytest.raises(ModelError, match="none called 'default'"):
        chat_format(tok, "tiny")
