import collections
import re
import sys
from pathlib import Path

rows = collections.defaultdict(list)
head = {}
for f in sys.argv[1:]:
    cur = None
    for line in Path(f).read_text().splitlines():
        m = re.match(r"(\w+) (\w+)(\{.*\}) rep (\d+): ML ([\d.]+)  RC\(ML start\) ([\d.]+)  RC\(uniform start\) ([\d.]+)", line)
        if m:
            d, mo, st, rep = m.group(1), m.group(2), m.group(3), m.group(4)
            if mo == "qda":
                name = "qda"
            elif "region" in st:
                name = "region graph"
            else:
                name = "mixture K=" + re.search(r"'components': (\d+)", st).group(1)
            cur = (d, name, rep)
            head[cur] = (float(m.group(6)), float(m.group(7)))
            continue
        m = re.match(r"\s+(\S+)\s+CRC mean ([\d.]+) \(std ([\d.]+), worst ([\d.]+)\) gap ([-+\d.]+) \| net-mean stats ([\d.]+)", line)
        if m and cur:
            v = m.group(1).replace("+start:uniform", "")
            if "before" in f:
                v += ", before the fix (no QDA keep_variances)"
            rows[(cur[0], cur[1], v)].append((cur[2], *head[cur], float(m.group(2)), float(m.group(3)), float(m.group(6))))
print("| data set | model | algorithm | RC (ML start) | RC (uniform start) | CRC peers | std across peers | network mean of "
      "statistics | gap | of it: disagreement (peers − network mean) | network mean − RC | repeats |")
print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for (d, mo, v), rs in sorted(rows.items()):
    seen = {}
    for r in rs:
        seen[r[0]] = r
    rs = list(seen.values())
    n = len(rs)
    a = [sum(x[i] for x in rs) / n for i in range(1, 6)]
    rc, rcu, crc, std, net = a
    print(f"| {d} | {mo} | {v} | {rc:.3f} | {rcu:.3f} | {crc:.3f} | {std:.3f} | {net:.3f} | {crc-rc:+.3f} | {crc-net:+.3f} "
          f"| {net-rc:+.3f} | {n} |")
