# test_docs.py - docs/integration.md quotes every python/examples/ file verbatim (after a marker line
# "<!-- example: PATH -->"), every example carries a "# runs-on:" line, every Python block of the guide
# compiles, and every reshard.NAME it uses exists in the package. Refresh the quotes after editing an example:
#   python3 tests/python/test_docs.py --update
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DOC = os.path.join(ROOT, "docs", "integration.md")
EXAMPLES = os.path.join(ROOT, "python", "examples")
MARKER = re.compile(r"^<!-- example: (\S+) -->\n```[a-z]*\n(.*?)^```$", re.M | re.S)


def fence(path):
    return "python" if path.endswith(".py") else ""


def update(text):
    def sub(m):
        with open(os.path.join(ROOT, m.group(1))) as f:
            body = f.read()
        return "<!-- example: %s -->\n```%s\n%s```" % (m.group(1), fence(m.group(1)), body)
    return MARKER.sub(sub, text)


def main():
    with open(DOC) as f:
        text = f.read()
    if "--update" in sys.argv:
        with open(DOC, "w") as f:
            f.write(update(text))
        print("updated", DOC)
        return 0
    errors = []
    quoted = {}
    for m in MARKER.finditer(text):
        quoted[m.group(1)] = m.group(2)
    for name in sorted(os.listdir(EXAMPLES)):
        if not name.endswith((".py", ".layout")):
            continue
        rel = "python/examples/" + name
        with open(os.path.join(EXAMPLES, name)) as f:
            body = f.read()
        if rel not in quoted:
            errors.append("%s is not quoted in docs/integration.md (add '<!-- example: %s -->' + a block)" % (rel, rel))
        elif quoted[rel] != body:
            errors.append("docs/integration.md quotes an old %s: run python3 tests/python/test_docs.py --update" % rel)
        if name.endswith(".py"):
            if not re.search(r"^# runs-on: (cpu|gpu)", body, re.M):
                errors.append("%s has no '# runs-on: cpu|gpu' line" % rel)
            try:
                compile(body, rel, "exec")
            except SyntaxError as e:
                errors.append("%s: %s" % (rel, e))
    for rel in quoted:
        if not os.path.exists(os.path.join(ROOT, rel)):
            errors.append("docs/integration.md quotes %s, which does not exist" % rel)
    blocks = re.findall(r"^```python\n(.*?)^```$", text, re.M | re.S)
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import reshard
    used = set()
    for i, b in enumerate(blocks):
        try:
            compile(b, "docs/integration.md python block %d" % (i + 1), "exec")
        except SyntaxError as e:
            errors.append(str(e))
        used.update(re.findall(r"\breshard\.([A-Za-z_]\w*)", b))
    # the API table and the prose: `Name(...)`, `x.method(...)`, `plan.method(...)`
    for name in sorted(used):
        if not hasattr(reshard, name):
            errors.append("the guide uses reshard.%s, which the package does not have" % name)
    for obj, names in (("Executor", re.findall(r"`x\.(\w+)", text)), ("Plan", re.findall(r"`plan\.(\w+)", text)),
                       ("Match", re.findall(r"`m\.(\w+)", text))):
        for n in sorted(set(names)):
            if not hasattr(getattr(reshard, obj), n) and n not in ("info", "bin"):
                errors.append("the guide mentions %s.%s, which does not exist" % (obj, n))
    for name in re.findall(r"^\| `(\w+)\(", text, re.M):
        if not hasattr(reshard, name):
            errors.append("the API table lists %s, which the package does not export" % name)
    # the report the guide shows is what check_names.py prints
    shown = re.search(r"^which prints\n\n```\n(.*?)^```$", text, re.M | re.S)
    if not shown:
        errors.append("the guide lost check_names.py's output block ('which prints')")
    elif os.environ.get("RESHARDC"):
        import subprocess
        out = subprocess.run([sys.executable, os.path.join(EXAMPLES, "check_names.py")], capture_output=True,
                             text=True, env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")))
        for line in shown.group(1).splitlines():
            if line not in out.stdout.splitlines():
                errors.append("check_names.py no longer prints this line of the guide: %s" % line)
    if "RESHARD_DEBUG" not in text:
        errors.append("the guide does not document RESHARD_DEBUG")
    for e in errors:
        print("FAIL:", e)
    print("%d examples quoted, %d Python blocks compiled, %d reshard names checked: %s" % (
        len(quoted), len(blocks), len(used), "FAILED" if errors else "OK"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
