// Command etcd runs upstream etcd, unchanged, as the e2e control plane's store.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
