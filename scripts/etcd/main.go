// Command etcd is etcd's own server (etcdmain), built from its published module for the tests'
// Kubernetes control plane: `go install` refuses etcd's server module (its go.mod carries replace
// directives), so this pinned wrapper module requires it instead. See ../kube-control-plane.sh.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
