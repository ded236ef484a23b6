module github.com/skillrun/skillrun

go 1.26.8

require github.com/opencontainers/runtime-spec v1.3.0
