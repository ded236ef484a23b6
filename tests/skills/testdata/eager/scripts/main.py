import json
import os
import sys

data = sys.stdin.read()
name = "/workspace/ran-" + os.urandom(6).hex()
with open(name, "w") as f:
    f.write(data)
print(json.dumps({"input": data, "file": os.path.basename(name)}))
