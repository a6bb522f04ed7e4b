"""The kit (issue 37): one archive holding a Debian root with the tool, sysbench, the allocators
and servers, and a launcher, for hosts with nothing installed and no network. request.py checks
what `kit build` is asked for, build.py assembles the archive, manifest.py is its kit.json (and the
"kit" record of every run made with it), launcher.sh the script at the top of the kit."""
