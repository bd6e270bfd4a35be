"""The one kind of exception for problems a user can fix, and how it is printed."""

from __future__ import annotations

from .api.frozen import frozen

MAX_SHOWN = 20  # problems printed for one spec: a spec of thousands of unknown keys would print them all


@frozen
class Problem:
    """One thing wrong with a spec: the dotted key path and a plain sentence."""

    path: str
    message: str


class UserError(Exception):
    """Printed as `Error: ...` lines; exit status 2 (bad spec, bad arguments, refusal) unless told otherwise."""

    exit_code = 2

    def lines(self, source: str) -> list[str]:
        return [f"Error: {self.args[0]}"]


class TableError(UserError):
    """A data table under generator/data/ breaks the registry's rules (a row lacks a fact a framework needs):
    `Error: <file>: <what>`, exit status 5, before any spec is read."""

    exit_code = 5


class SpecError(UserError):
    """Problems tied to keys of the job spec: `Error: <spec file>: <key path>: <sentence>`, sorted by key path."""

    def __init__(self, problems: list[Problem]):
        super().__init__("; ".join(f"{p.path}: {p.message}" for p in problems))
        self.problems = sorted(problems, key=lambda p: (p.path, p.message))

    @classmethod
    def at(cls, path: str, message: str) -> SpecError:
        return cls([Problem(path, message)])

    def lines(self, source: str) -> list[str]:
        source = show_name(source, limit=4096)
        shown = [f"Error: {source}: {p.path}: {p.message}" for p in self.problems[:MAX_SHOWN]]
        more = len(self.problems) - MAX_SHOWN
        return shown + ([f"Error: {source}: (more): {more} more problem(s) not listed; fix these first"]
                        if more > 0 else [])


def show(value: object, limit: int = 60) -> str:
    """A user value inside a message: quoted, escaped and cut short, never a Python repr of a container."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        text = value.encode("unicode_escape").decode("ascii").replace("'", "\\'")
        if len(text) > limit:
            text = text[: limit - 3] + "..."
        return f"'{text}'"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


# Characters that str.isprintable() passes but that show as nothing: Unicode's Default_Ignorable_Code_Point
# (DerivedCoreProperties.txt, https://www.unicode.org/Public/UCD/latest/ucd/DerivedCoreProperties.txt, whose
# Hangul fillers, variation selectors, U+180E and U+2060..U+206F are letters or marks a font draws blank) plus
# U+2800 BRAILLE PATTERN BLANK, a symbol drawn as an empty cell. Inclusive ranges.
_INVISIBLE = ((0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
              (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x2800, 0x2800),
              (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8),
              (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF))


def invisible(ch: str) -> bool:
    """A default-ignorable or blank-drawn character: text holding it reads the same as text without it."""
    return any(low <= ord(ch) <= high for low, high in _INVISIBLE)


def prints_as_itself(ch: str) -> bool:
    """No control, format, unusual space or unassigned character (which a terminal may act on or show as
    something else), and nothing drawn as blank."""
    return ch.isprintable() and not invisible(ch)


def plain_text(text: str) -> bool:
    """Every character of `text` prints as itself: safe to write into PLAN.md and plan.json and to print. Printable
    ASCII is known at once (no ASCII character is invisible): a plan checks every note and name it prints."""
    return (text.isascii() and text.isprintable()) or all(map(prints_as_itself, text))


def show_name(text: str, limit: int = 60) -> str:
    """A name (a key, a file) inside a message: as written when every character prints as itself, else show()n."""
    return text if plain_text(text) and 0 < len(text) <= limit else show(text, limit)


def show_path(path: object) -> str:
    """A path echoed to the terminal: as it is, except that what a terminal would act on or hide (control and
    format characters, other separators than the space, undecodable bytes) and the backslash are escaped, so a
    hostile file name cannot move the cursor, recolour the screen or pass for another name."""
    return "".join(ch if prints_as_itself(ch) and ch != "\\" else _escape(ch) for ch in str(path))


def _escape(ch: str) -> str:
    if 0xDC80 <= ord(ch) <= 0xDCFF:  # a byte that is not UTF-8, as os.fsdecode carries it
        return f"\\x{ord(ch) - 0xDC00:02x}"
    return ch.encode("unicode_escape").decode("ascii")  # \\, \n, \x1b, \u202e, \U000f0000
