// Command etcd is upstream's etcd server, built from the go.etcd.io/etcd
// version pinned in go.mod. etcd's own main module carries replace directives,
// so `go install go.etcd.io/etcd/v3@version` is refused; this wrapper calls the
// same entry point instead.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
