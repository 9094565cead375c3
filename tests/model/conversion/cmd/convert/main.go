// Command convert reads resource.k8s.io objects of any version the API server
// serves, one JSON object per line on stdin, and writes each as the API server
// would serve it in resource.k8s.io/v1: decoded (with that version's defaults)
// into the internal form and encoded as v1, by upstream's own scheme. A line
// it cannot convert becomes {"error": "..."}.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/resource/install"
)

func main() {
	codecs := serializer.NewCodecFactory(legacyscheme.Scheme)
	decoder := codecs.UniversalDecoder()
	encoder := codecs.LegacyCodec(resourcev1.SchemeGroupVersion)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		obj, _, err := decoder.Decode(in.Bytes(), nil, nil)
		var line []byte
		if err == nil {
			line, err = runtime.Encode(encoder, obj)
		}
		if err != nil {
			line, _ = json.Marshal(map[string]string{"error": err.Error()})
		}
		fmt.Fprintf(out, "%s\n", line)
	}
}
