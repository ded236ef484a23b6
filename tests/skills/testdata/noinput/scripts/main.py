import json
import os

name = "ran-" + os.urandom(6).hex()
with open("/workspace/" + name, "w") as f:
    f.write("ran")
print(json.dumps({"file": name}))
