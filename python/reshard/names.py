# names.py - building the name -> tensor map a rank binds from a framework's parameters (model.named_parameters(),
# a state dict, vLLM's model), with a user-supplied rename function from framework names to the layout's names.
import re


def named_tensors(named, rename=None, prefix=""):
    """{layout name: tensor} from (name, tensor) pairs or a mapping: model.named_parameters(),
    model.state_dict(), dict(...). ``rename(name)`` returns the layout's `as "..."` name, or None to leave the
    tensor out (it is then not bound); default: the name itself. ``prefix`` is stripped from names first
    (e.g. "module." of a DDP wrapper). Two tensors renamed to one name raise ValueError naming both."""
    items = named.items() if hasattr(named, "items") else named
    out, origin = {}, {}
    for name, t in items:
        if prefix and name.startswith(prefix):
            name = name[len(prefix):]
        new = rename(name) if rename else name
        if new is None:
            continue
        if not isinstance(new, str):
            raise TypeError("rename(%r) returned %r: a name (str) or None" % (name, new))
        if new in out:
            raise ValueError('"%s" and "%s" are both renamed to "%s"' % (origin[new], name, new))
        out[new], origin[new] = t, name
    return out


def regex_rename(rules, keep_unmatched=False):
    """A rename function from (pattern, replacement) rules, tried in order with re.fullmatch; the first that
    matches gives the name (replacement None: leave the tensor out). Names that no rule matches are kept as
    they are when keep_unmatched, else left out. Example: the stage-local layer numbers of a Megatron pipeline
    stage are in the names already, so  [(r"module\\.(.*)", r"\\1")]  only strips a wrapper."""
    compiled = [(re.compile(p), r) for p, r in rules]

    def rename(name):
        for pat, rep in compiled:
            m = pat.fullmatch(name)
            if m:
                return None if rep is None else m.expand(rep)
        return name if keep_unmatched else None

    return rename
