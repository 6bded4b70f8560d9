"""The report's two renderings: a self-contained HTML page (images as data URIs, no script,
nothing fetched) and a Markdown summary, from the same tables and figures."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field

from dse.plots.figure import Plot

__all__ = ["Report", "Section", "Table", "markdown", "page"]


@dataclass(frozen=True)
class Table:
    """A table: a sentence before it, the column names, their alignment ("l"/"r" each) and
    the rows of text cells."""

    intro: str
    columns: tuple[str, ...]
    align: str
    rows: list[tuple[str, ...]]


@dataclass(frozen=True)
class Section:
    """A part of the report: its heading, facts (name, value), the figures the page shows in
    it (by plot name) and its tables."""

    heading: str
    facts: list[tuple[str, str]] = field(default_factory=list)
    figures: tuple[str, ...] = ()
    tables: list[Table] = field(default_factory=list)


@dataclass
class Report:
    """What the page and the summary show: the study's facts, the front as text and the
    figures beside it, the sections, every figure (those no section shows come last on the
    page) and notes."""

    title: str
    facts: list[tuple[str, str]]
    front: str  # empty: no front to show as text
    front_figures: tuple[str, ...] = ()
    sections: list[Section] = field(default_factory=list)
    plots: list[Plot] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def _md_table(table: Table) -> list[str]:
    lines = [table.intro, ""] if table.intro else []
    lines.append("| " + " | ".join(table.columns) + " |")
    lines.append("|" + "|".join("---:" if a == "r" else "---" for a in table.align) + "|")
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
    return [*lines, ""]


def markdown(report: Report) -> str:
    parts = [f"# {report.title}", ""]
    parts += [f"- **{k}**: {v}" for k, v in report.facts]
    parts.append("")
    if report.front:  # a workload's page has no single front
        parts += ["## Pareto front", "", "```", report.front, "```", ""]
    for section in report.sections:
        parts += [f"## {section.heading}", ""]
        if section.facts:
            parts += [*[f"- **{k}**: {v}" for k, v in section.facts], ""]
        for table in section.tables:
            parts += _md_table(table)
    if report.notes:
        parts += ["## Notes", "", *[f"- {n}" for n in report.notes], ""]
    parts += [f"![{p.title}]({p.name}.png)" for p in report.plots]
    return "\n".join([*parts, ""])


_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:1200px;margin:1.5em auto;padding:0 1em;"
    "color:#222}h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid"
    " #ddd}table{border-collapse:collapse;margin:.5em 0;font-size:.85em}td,th{padding:.2em"
    " .6em;border-bottom:1px solid #eee;vertical-align:top}th{text-align:left;background:#f4f4"
    "f4}td.r{text-align:right;font-variant-numeric:tabular-nums}td.name{overflow-wrap:anywhere;"
    "max-width:40em}table.facts th{background:none}img{max-width:100%;border:1px solid #eee}"
    "pre{background:#f6f6f6;padding:.5em;overflow-x:auto;font-size:.8em}figure{margin:1em 0}"
    "figcaption{font-size:.85em;color:#555}details summary{cursor:pointer;color:#036}"
)


def _html_facts(facts: list[tuple[str, str]]) -> str:
    esc = html.escape
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in facts)
    return f"<table class='facts'>{rows}</table>"


def _html_table(table: Table) -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(c)}</th>" for c in table.columns)
    classes = ["r" if a == "r" else "name" for a in table.align]
    body = "".join(
        "<tr>"
        + "".join(f"<td class='{k}'>{esc(c)}</td>" for k, c in zip(classes, row, strict=True))
        + "</tr>"
        for row in table.rows
    )
    intro = f"<p>{esc(table.intro)}</p>" if table.intro else ""
    return f"{intro}<table><tr>{head}</tr>{body}</table>"


def _figure(plot: Plot) -> str:
    esc = html.escape
    data = base64.b64encode(plot.png).decode()
    return (
        f"<figure id='{esc(plot.name)}'><img alt='{esc(plot.title)}' "
        f"src='data:image/png;base64,{data}'><figcaption>{esc(plot.title)} "
        f"(<a href='{esc(plot.name)}.svg'>SVG</a>)</figcaption></figure>"
    )


def page(report: Report) -> str:
    esc = html.escape
    plots = {p.name: p for p in report.plots}
    placed = set(report.front_figures).union(*(s.figures for s in report.sections))
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{esc(report.title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{esc(report.title)}</h1>{_html_facts(report.facts)}",
        *[_figure(plots[n]) for n in report.front_figures if n in plots],
    ]
    if report.front:
        parts.append(
            f"<details><summary>The front as a table</summary><pre>{esc(report.front)}</pre>"
            "</details>"
        )
    for section in report.sections:
        parts.append(f"<h2>{esc(section.heading)}</h2>")
        if section.facts:
            parts.append(_html_facts(section.facts))
        parts += [_figure(plots[n]) for n in section.figures if n in plots]
        parts += [_html_table(t) for t in section.tables]
    rest = [p for p in report.plots if p.name not in placed]
    if rest:
        parts.append("<h2>The search</h2>")
        parts += [_figure(p) for p in rest]
    if report.notes:
        notes = "".join(f"<li>{esc(n)}</li>" for n in report.notes)
        parts.append(f"<h2>Notes</h2><ul>{notes}</ul>")
    parts.append("</body></html>\n")
    return "".join(parts)
