"""Lexer and recursive-descent parser for the CEL grammar, producing a small AST.

celpy's Lark grammar cannot parse CEL optional syntax (`.?field`, `[?key]`),
which DRA selectors rely on (`device.attributes["d"].?x.orValue(y)`), so drax
parses CEL itself. The grammar is the one in the CEL language definition; the
AST keeps the source offset of every node (the operator token for
operators, the `(` for calls, the `.` for selections, as cel-go does) so
compile errors can point at the same line and column Kubernetes reports.
Macros (`has`, `all`, `map`, `cel.bind`, ...) stay ordinary calls here: the
checker expands them, because whether `x.all(...)` is a macro depends only on
its shape, and the checker already walks every call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

from app.cel.values import UInt

RESERVED: Final = frozenset({
    "as", "break", "const", "continue", "else", "for", "function", "if", "import", "let",
    "loop", "package", "namespace", "return", "var", "void", "while", "in",
})
MAX_DEPTH: Final = 250


class CelSyntaxError(Exception):
    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


# ----------------------------------------------------------------------------- AST


@dataclass(slots=True, eq=False)
class Node:
    pos: int


@dataclass(slots=True, eq=False)
class Literal(Node):
    value: Any


@dataclass(slots=True, eq=False)
class Ident(Node):
    name: str


@dataclass(slots=True, eq=False)
class Select(Node):
    operand: Node
    field: str
    optional: bool = False


@dataclass(slots=True, eq=False)
class Index(Node):
    operand: Node
    index: Node
    optional: bool = False


@dataclass(slots=True, eq=False)
class Call(Node):
    """A function or operator call; operators use cel-go's names (`_+_`, `!_`)."""

    name: str
    args: list[Node]
    target: Node | None = None


@dataclass(slots=True, eq=False)
class ListLit(Node):
    elements: list[Node]
    optional_indices: frozenset[int] = field(default_factory=frozenset)


@dataclass(slots=True, eq=False)
class MapLit(Node):
    entries: list[tuple[Node, Node, bool]]


@dataclass(slots=True, eq=False)
class StructLit(Node):
    type_name: str


# ----------------------------------------------------------------------------- lexer

_TOKEN_RE: Final = re.compile(r"""
  (?P<ws>[ \t\n\r\f]+|//[^\n]*)
| (?P<string>(?:[rR][bB]?|[bB][rR]?)?(?:'''|\"\"\"|'|"))
| (?P<num>(?:[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|\.[0-9]+(?:[eE][+-]?[0-9]+)?)
        |0[xX][0-9a-fA-F]+[uU]?|[0-9]+[uU]?)
| (?P<ident>[_a-zA-Z][_a-zA-Z0-9]*)
| (?P<op>==|!=|<=|>=|&&|\|\||[-+*/%!<>?:.,\[\](){}])
""", re.VERBOSE)

_ESCAPES: Final = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
                   "\\": "\\", "'": "'", '"': '"', "`": "`", "?": "?"}


@dataclass(slots=True)
class Token:
    kind: str  # "num", "string", "ident", "op", "eof"
    text: str
    pos: int
    value: Any = None


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    pos, end = 0, len(text)
    while pos < end:
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise CelSyntaxError(f"Syntax error: token recognition error at: '{text[pos]}'", pos)
        kind = m.lastgroup or ""
        if kind == "ws":
            pos = m.end()
            continue
        if kind == "string":
            value, new_pos = _read_string(text, pos, m.group())
            tokens.append(Token("string", text[pos:new_pos], pos, value))
            pos = new_pos
            continue
        if kind == "ident" and m.end() < end and text[m.end()] in "'\"" and (
                m.group().lower() in ("r", "b", "rb", "br")):
            raise CelSyntaxError("Syntax error: token recognition error", pos)
        tokens.append(Token(kind, m.group(), pos, _number(m.group(), pos) if kind == "num"
                            else None))
        pos = m.end()
    tokens.append(Token("eof", "<EOF>", end))
    return tokens


def _number(text: str, pos: int) -> Any:
    if text[-1] in "uU":
        body = text[:-1]
        value = int(body, 16) if body.lower().startswith("0x") else int(body)
        if value >= 1 << 64:
            raise CelSyntaxError("Syntax error: invalid uint literal", pos)
        return UInt(value)
    if text.lower().startswith("0x"):
        return int(text, 16)
    if any(c in text for c in ".eE"):
        return float(text)
    return int(text)


def _int_literal(value: int, pos: int) -> int:
    if value >= 1 << 63:
        raise CelSyntaxError("Syntax error: invalid int literal", pos)
    return value


def _read_string(text: str, start: int, opener: str) -> tuple[Any, int]:
    prefix = opener.rstrip("'\"").lower()
    quote = opener[len(prefix):]
    raw, is_bytes = "r" in prefix, "b" in prefix
    pos, end = start + len(opener), len(text)
    out: list[str] = []
    while True:
        if pos >= end or (len(quote) == 1 and text[pos] in "\r\n"):
            raise CelSyntaxError("Syntax error: token recognition error at: "
                                 f"'{text[start:pos + 1]}'", start)
        if text.startswith(quote, pos):
            pos += len(quote)
            break
        ch = text[pos]
        if ch == "\\" and not raw:
            decoded, pos = _escape(text, pos, start, is_bytes=is_bytes)
            out.append(decoded)
            continue
        if raw and ch == "\\" and pos + 1 < end:
            out.append(text[pos:pos + 2])
            pos += 2
            continue
        out.append(ch)
        pos += 1
    value = "".join(out)
    if is_bytes:
        return value.encode("utf-8", "surrogateescape") if raw else _to_bytes(value), pos
    return value, pos


def _to_bytes(value: str) -> bytes:
    # Escapes \x and octal in bytes literals denote single bytes; other characters are UTF-8.
    out = bytearray()
    for ch in value:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(code - 0xDC00)
        else:
            out.extend(ch.encode("utf-8"))
    return bytes(out)


def _escape(text: str, pos: int, start: int, *, is_bytes: bool) -> tuple[str, int]:
    nxt = text[pos + 1:pos + 2]
    if nxt in _ESCAPES:
        return _ESCAPES[nxt], pos + 2
    width = {"x": 2, "X": 2, "u": 4, "U": 8}.get(nxt)
    if width is not None:
        digits = text[pos + 2:pos + 2 + width]
        if len(digits) != width or not re.fullmatch(r"[0-9a-fA-F]+", digits):
            raise CelSyntaxError("Syntax error: invalid escape sequence", start)
        code = int(digits, 16)
        if width == 2 and is_bytes:
            return chr(0xDC00 + code) if code >= 0x80 else chr(code), pos + 2 + width
        if (width > 2 and is_bytes) or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise CelSyntaxError("Syntax error: invalid escape sequence", start)
        return chr(code), pos + 2 + width
    digits = text[pos + 1:pos + 4]
    if len(digits) == 3 and re.fullmatch(r"[0-3][0-7][0-7]", digits):
        code = int(digits, 8)
        if is_bytes and code >= 0x80:
            return chr(0xDC00 + code), pos + 4
        return chr(code), pos + 4
    raise CelSyntaxError("Syntax error: invalid escape sequence", start)


# ----------------------------------------------------------------------------- parser

_RELATIONS: Final = {"<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_", "==": "_==_",
                     "!=": "_!=_"}
_ADDITIVE: Final = {"+": "_+_", "-": "_-_"}
_MULTIPLICATIVE: Final = {"*": "_*_", "/": "_/_", "%": "_%_"}


class Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0
        self.depth = 0

    def parse(self) -> Node:
        if not self.text.strip():
            raise CelSyntaxError("Syntax error: mismatched input '<EOF>' expecting expression",
                                 0)
        node = self.expr()
        tok = self.peek()
        if tok.kind != "eof":
            raise CelSyntaxError(f"Syntax error: extraneous input '{tok.text}' expecting <EOF>",
                                 tok.pos)
        return node

    # -- token helpers

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def at(self, text: str) -> bool:
        tok = self.tokens[self.i]
        return tok.kind == "op" and tok.text == text

    def take(self) -> Token:
        tok = self.tokens[self.i]
        if tok.kind != "eof":
            self.i += 1
        return tok

    def expect(self, text: str) -> Token:
        tok = self.peek()
        if tok.kind != "op" or tok.text != text:
            raise CelSyntaxError(f"Syntax error: mismatched input '{tok.text}' expecting '{text}'",
                                 tok.pos)
        return self.take()

    # -- grammar

    def expr(self) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise CelSyntaxError("Syntax error: expression recursion limit exceeded",
                                 self.peek().pos)
        try:
            cond = self.binary_or()
            if not self.at("?"):
                return cond
            op = self.take()
            then = self.binary_or()
            self.expect(":")
            other = self.expr()
            return Call(op.pos, "_?_:_", [cond, then, other])
        finally:
            self.depth -= 1

    def binary_or(self) -> Node:
        left = self.binary_and()
        while self.at("||"):
            op = self.take()
            left = Call(op.pos, "_||_", [left, self.binary_and()])
        return left

    def binary_and(self) -> Node:
        left = self.relation()
        while self.at("&&"):
            op = self.take()
            left = Call(op.pos, "_&&_", [left, self.relation()])
        return left

    def relation(self) -> Node:
        left = self.addition()
        while True:
            tok = self.peek()
            if tok.kind == "op" and tok.text in _RELATIONS:
                name = _RELATIONS[tok.text]
            elif tok.kind == "ident" and tok.text == "in":
                name = "@in"
            else:
                return left
            self.take()
            left = Call(tok.pos, name, [left, self.addition()])

    def addition(self) -> Node:
        left = self.multiplication()
        while self.peek().kind == "op" and self.peek().text in _ADDITIVE:
            op = self.take()
            left = Call(op.pos, _ADDITIVE[op.text], [left, self.multiplication()])
        return left

    def multiplication(self) -> Node:
        left = self.unary()
        while self.peek().kind == "op" and self.peek().text in _MULTIPLICATIVE:
            op = self.take()
            left = Call(op.pos, _MULTIPLICATIVE[op.text], [left, self.unary()])
        return left

    def unary(self) -> Node:
        if self.at("!") or self.at("-"):
            ops = []
            symbol = self.peek().text
            while self.at(symbol):
                ops.append(self.take())
            if symbol == "!":
                # After `!` only a member may follow, and in CEL's grammar a
                # signed number is one (a literal): `!!-0.0` is the double -0.0.
                if self.at("-") and self._at_number(ahead=1):
                    self.take()
                    operand = self._negative_literal()
                else:
                    operand = self.member()
                if len(ops) % 2 == 0:
                    return operand
            elif len(ops) % 2 == 0:
                # cel-go's parser drops an even run of `-` without a check.
                return self.member()
            elif self._at_number() and not self._literal_has_member():
                # cel-go lexes `-` directly before a number as part of a negative literal.
                ops.pop()
                operand = self._negative_literal()
            else:
                operand = self.member()
            name = "!_" if symbol == "!" else "-_"
            for op in reversed(ops):
                operand = Call(op.pos, name, [operand])
            return operand
        return self.member()

    def _at_number(self, *, ahead: int = 0) -> bool:
        """An int or double literal, which a `-` before it signs (a uint has no sign)."""
        tok = self.peek(ahead)
        return tok.kind == "num" and not isinstance(tok.value, UInt)

    def _negative_literal(self) -> Node:
        """The number after a `-` already taken, with its member suffix."""
        tok = self.take()
        return self.member_suffix(Literal(tok.pos, _negate(tok)))

    def _literal_has_member(self) -> bool:
        nxt = self.peek(1)
        return nxt.kind == "op" and nxt.text in (".", "[")

    def member(self) -> Node:
        return self.member_suffix(self.primary())

    def member_suffix(self, node: Node) -> Node:
        while True:
            if self.at("."):
                dot = self.take()
                optional = False
                if self.at("?"):
                    self.take()
                    optional = True
                name_tok = self.peek()
                if name_tok.kind != "ident" or name_tok.text in RESERVED:
                    raise CelSyntaxError(
                        f"Syntax error: mismatched input '{name_tok.text}' expecting IDENTIFIER",
                        name_tok.pos)
                self.take()
                if self.at("(") and not optional:
                    open_tok = self.take()
                    args = self.expr_list(")")
                    node = Call(open_tok.pos, name_tok.text, args, target=node)
                else:
                    node = Select(dot.pos, node, name_tok.text, optional)
            elif self.at("["):
                open_tok = self.take()
                optional = False
                if self.at("?"):
                    self.take()
                    optional = True
                index = self.expr()
                self.expect("]")
                node = Index(open_tok.pos, node, index, optional)
            elif self.at("{") and isinstance(node, Ident | Select):
                open_tok = self.take()
                self._skip_struct_body()
                return StructLit(open_tok.pos, _qualified_name(node))
            else:
                return node

    def _skip_struct_body(self) -> None:
        depth = 1
        while depth:
            tok = self.take()
            if tok.kind == "eof":
                raise CelSyntaxError("Syntax error: missing '}' at '<EOF>'", tok.pos)
            if tok.kind == "op" and tok.text in "{[(":
                depth += 1
            elif tok.kind == "op" and tok.text in "}])":
                depth -= 1

    def primary(self) -> Node:
        tok = self.peek()
        if tok.kind == "num":
            self.take()
            value = tok.value
            if type(value) is int:
                value = _int_literal(value, tok.pos)
            return Literal(tok.pos, value)
        if tok.kind == "string":
            self.take()
            return Literal(tok.pos, tok.value)
        if tok.kind == "ident":
            return self._ident_or_call()
        if tok.kind == "op":
            if tok.text == ".":
                self.take()
                return self._ident_or_call()
            if tok.text == "(":
                self.take()
                node = self.expr()
                self.expect(")")
                return node
            if tok.text == "[":
                self.take()
                return self._list_literal(tok.pos)
            if tok.text == "{":
                self.take()
                return self._map_literal(tok.pos)
        raise CelSyntaxError(f"Syntax error: mismatched input '{tok.text}' expecting expression",
                             tok.pos)

    def _ident_or_call(self) -> Node:
        tok = self.take()
        if tok.kind != "ident" or tok.text in RESERVED:
            raise CelSyntaxError(f"Syntax error: mismatched input '{tok.text}' expecting "
                                 "IDENTIFIER", tok.pos)
        if tok.text in ("true", "false", "null"):
            return Literal(tok.pos, {"true": True, "false": False, "null": None}[tok.text])
        if self.at("("):
            open_tok = self.take()
            return Call(open_tok.pos, tok.text, self.expr_list(")"))
        return Ident(tok.pos, tok.text)

    def expr_list(self, closer: str) -> list[Node]:
        args: list[Node] = []
        if self.at(closer):
            self.take()
            return args
        while True:
            args.append(self.expr())
            if self.at(","):
                self.take()
                continue
            self.expect(closer)
            return args

    def _list_literal(self, pos: int) -> Node:
        elements: list[Node] = []
        optional: set[int] = set()
        while not self.at("]"):
            if self.at("?"):
                self.take()
                optional.add(len(elements))
            elements.append(self.expr())
            if not self.at(","):
                break
            self.take()
        self.expect("]")
        return ListLit(pos, elements, frozenset(optional))

    def _map_literal(self, pos: int) -> Node:
        entries: list[tuple[Node, Node, bool]] = []
        while not self.at("}"):
            optional = False
            if self.at("?"):
                self.take()
                optional = True
            key = self.expr()
            self.expect(":")
            entries.append((key, self.expr(), optional))
            if not self.at(","):
                break
            self.take()
        self.expect("}")
        return MapLit(pos, entries)


def _negate(tok: Token) -> Any:
    value = tok.value
    if type(value) is int and -value < -(1 << 63):
        raise CelSyntaxError("Syntax error: invalid int literal", tok.pos)
    return -value


def _qualified_name(node: Node) -> str:
    if isinstance(node, Ident):
        return node.name
    if isinstance(node, Select):
        return f"{_qualified_name(node.operand)}.{node.field}"
    return "?"


def parse(text: str) -> Node:
    return Parser(text).parse()
