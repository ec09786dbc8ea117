"""Flink's INITCAP with one meaning in every engine (federation.canonical): Spark's own
INITCAP cuts words at spaces only and DuckDB has none, so it is written out as a transform
of the string's runs, which both compute alike (docs/sql.md, the scalar functions)."""

from __future__ import annotations

from sqlglot import exp

#: what the parsers give INITCAP(s) as delimiters (Spark's ' ', DuckDB's every space and
#: punctuation): INITCAP(s, d) with another is Snowflake's, refused
DELIMITERS = (" ", " \t\n\r\x0c\x0b!\"#$%&'()*+,\\-./:;<=>?@\\[\\]^_`{|}~")
_WORD, _SEGMENTS = "^[A-Za-z0-9]", "([A-Za-z0-9]+|[^A-Za-z0-9]+)"


def initcap_form(s: exp.Expression) -> exp.Expression:
    """Flink's INITCAP(s) as Spark and DuckDB compute it alike: `s` cut into words (runs of
    ASCII letters and digits) and the runs between them, each word's first character upper
    case and the rest lower case, the rest as it is, joined (Spark's own INITCAP cuts at
    spaces only; DuckDB has none)."""
    w = exp.to_identifier("w")
    word = exp.Case(ifs=[exp.If(
        this=exp.RegexpLike(this=w.copy(), expression=exp.Literal.string(_WORD)),
        true=exp.DPipe(this=exp.Upper(this=exp.Substring(
            this=w.copy(), start=exp.Literal.number(1), length=exp.Literal.number(1))),
            expression=exp.Lower(this=exp.Substring(this=w.copy(),
                                                    start=exp.Literal.number(2)))))],
        default=w.copy())
    parts = exp.RegexpExtractAll(this=s, expression=exp.Literal.string(_SEGMENTS),
                                 group=exp.Literal.number(1))
    return exp.ArrayToString(this=exp.Transform(this=parts, expression=exp.Lambda(
        this=word, expressions=[w])), expression=exp.Literal.string(""))


def initcap_argument(node: exp.Expression) -> exp.Expression | None:
    """The argument of INITCAP's canonical form `node`, else None."""
    t = node.this
    if not (isinstance(t, exp.Transform) and isinstance(t.this, exp.RegexpExtractAll)):
        return None
    form = initcap_form(t.this.this.copy())  # as written, or read back (Spark's text omits
    form.this.this.set("group", t.this.args.get("group"))  # its default group, 1)
    return t.this.this if node.sql("duckdb") == form.sql("duckdb") else None
