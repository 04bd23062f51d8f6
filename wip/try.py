"""Rewrites hand-written error propagation into SANDGATE_TRY (common/error.hpp)."""
import re, sys

def skip_literal(s, i):
    q = s[i]
    if q == '"' and i > 0 and s[i-1] == 'R':
        m = re.match(r'"([^(]*)\(', s[i:])
        end = s.find(')' + m.group(1) + '"', i)
        return end + len(m.group(1)) + 2
    j = i + 1
    while s[j] != q:
        j += 2 if s[j] == '\\' else 1
    return j + 1

def find_stmt_end(s, i, stop=';'):
    """Index of `stop` at depth 0 from i (skipping literals and comments)."""
    depth = 0
    while i < len(s):
        c = s[i]
        if c in '"\'':
            if c == "'" and i > 0 and s[i-1].isalnum():  # digit separator 1'000
                i += 1; continue
            i = skip_literal(s, i); continue
        if s.startswith('//', i):
            i = s.index('\n', i); continue
        if c in '([{': depth += 1
        elif c in ')]}':
            if depth == 0 and c == stop: return i
            depth -= 1
            if depth < 0: return -1
        elif c == stop and depth == 0: return i
        i += 1
    return -1

def block_end(s, i):
    """End of the block enclosing position i (the index of its closing brace)."""
    depth = 0
    while i < len(s):
        c = s[i]
        if c in '"\'':
            if c == "'" and s[i-1].isalnum(): i += 1; continue
            i = skip_literal(s, i); continue
        if s.startswith('//', i):
            i = s.index('\n', i); continue
        if c == '{': depth += 1
        elif c == '}':
            if depth == 0: return i
            depth -= 1
        i += 1
    return len(s)

def mask(s):
    """s with the insides of literals and comments blanked (same length)."""
    out = list(s); i = 0
    while i < len(s):
        c = s[i]
        if c in '"\'' and not (c == "'" and i > 0 and s[i-1].isalnum()):
            j = skip_literal(s, i)
            for k in range(i + 1, j - 1): out[k] = ' '
            i = j; continue
        if s.startswith('//', i):
            j = s.find('\n', i); j = len(s) if j < 0 else j
            for k in range(i, j): out[k] = ' '
            i = j; continue
        i += 1
    return ''.join(out)

CHECK = (r'[ \t]*if \(!{n}\)(?: \{{\s*return std::unexpected\({n}\.error\(\)\);\s*\}}|'
         r'\s*return std::unexpected\({n}\.error\(\)\);)')

def rewrite(s):
    out = []; pos = 0; emit = 0; count = 0
    decl = re.compile(r'^([ \t]*)(const )?auto (\w+) = ', re.M)
    ifinit = re.compile(r'^([ \t]*)if \((?:const )?auto (\w+) = ', re.M)
    while True:
        m1 = decl.search(s, pos); m2 = ifinit.search(s, pos)
        ms = [m for m in (m1, m2) if m]
        if not ms: break
        m = min(ms, key=lambda m: m.start())
        if m is m2:
            name = m.group(2); e = find_stmt_end(s, m.end())
            if e < 0: pos = m.end(); continue
            expr = s[m.end():e]
            ret = r'return std::unexpected\(' + name + r'\.error\(\)\);'
            tail = re.compile(r';\s*!' + name + r'\)(?: \{\s*' + ret + r'\s*\}|\s*' + ret + ')').match(s, e)
            if not tail or re.search(r'\b' + name + r'\b', expr):
                pos = m.end(); continue
            out.append(s[emit:m.start()] + m.group(1) + 'SANDGATE_TRY(' + expr + ');')
            pos = emit = tail.end(); count += 1; continue
        indent, const, name = m.group(1), m.group(2) or '', m.group(3)
        e = find_stmt_end(s, m.end())
        if e < 0: pos = m.end(); continue
        expr = s[m.end():e]
        chk = re.compile(r'\n' + CHECK.format(n=name)).match(s, e + 1)
        if not chk or re.search(r'\b' + name + r'\b', expr) or expr.lstrip().startswith('['):
            pos = m.end(); continue
        end = block_end(s, chk.end())
        rest = s[chk.end():end]
        masked = mask(rest)
        uses = list(re.finditer(r'(?<![\w.>:])(\*?)\b' + name + r'\b(->|\.value\(\))?', masked))
        ok = all(u.group(1) or u.group(2) for u in uses) and not re.search(r'\b' + name + r'\s*=[^=]', masked)
        # a deref like `a *name` is never a multiplication of an Expected; `&name` or `name.`
        # or a bare use keeps the Expected
        if not ok: pos = m.end(); continue
        if not uses:
            out.append(s[emit:m.start()] + indent + 'SANDGATE_TRY(' + expr + ');')
        else:
            def fix(u):
                if u.group(2) == '->': return name + '.'
                return name
            pieces = []; at = 0
            for u in uses:
                pieces.append(rest[at:u.start()]); pieces.append(fix(u)); at = u.end()
            pieces.append(rest[at:])
            new_rest = ''.join(pieces)
            out.append(s[emit:m.start()] + indent + const + 'auto ' + name + ' = SANDGATE_TRY(' + expr + ');')
            out.append(new_rest)
            pos = emit = end; count += 1; continue
        pos = emit = chk.end(); count += 1
    out.append(s[emit:])
    return ''.join(out), count

total = 0
for f in sys.argv[1:]:
    s = open(f).read()
    if 'std::unexpected' not in s: continue
    new, n = rewrite(s)
    if n:
        if '#include "common/error.hpp"' not in new and '#include "sandbox/base.hpp"' not in new:
            pass  # the macro comes with every Expected (common/error.hpp) through the headers
        open(f, 'w').write(new); total += n
        print(f, n)
print('total', total, file=sys.stderr)
