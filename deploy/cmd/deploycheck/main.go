// Command deploycheck renders every overlay of the Kubernetes manifests with kustomize and
// validates the output offline (package deploy/deploycheck): `make deploy-check`.
//
//	deploycheck [-root deploy/k8s] [-dockerfile deploy/Dockerfile] [-flows]
//	deploycheck -render <overlay>
//
// It prints each finding and exits 1 when there is one, 0 otherwise; -flows also prints every
// network flow the NetworkPolicies allow. -render prints one overlay's rendered YAML, what
// `kubectl apply -k deploy/k8s/overlays/<overlay>` applies.
package main

import (
	"flag"
	"fmt"
	"os"

	"slidecells/deploy/deploycheck"
)

func main() {
	root := flag.String("root", "deploy/k8s", "the manifests' folder (its overlays/* are rendered)")
	dockerfile := flag.String("dockerfile", "deploy/Dockerfile", "the Dockerfile whose stages build the slidecells/* images")
	flows := flag.Bool("flows", false, "print every flow the NetworkPolicies allow")
	render := flag.String("render", "", "print the rendered YAML of this overlay (as kustomize build does) and exit")
	flag.Parse()
	if *render != "" {
		b, err := deploycheck.RenderYAML(*root, *render)
		if err != nil {
			fmt.Fprintln(os.Stderr, "deploycheck:", err)
			os.Exit(1)
		}
		os.Stdout.Write(b)
		return
	}
	r, err := deploycheck.Check(deploycheck.Options{Root: *root, Dockerfile: *dockerfile})
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploycheck:", err)
		os.Exit(2)
	}
	if *flows {
		for _, f := range r.Flows {
			fmt.Println("flow:", f)
		}
	}
	for _, f := range r.Findings {
		fmt.Println(f)
	}
	if !r.OK() {
		fmt.Printf("deploy-check: %d finding(s) in %d overlays (%d objects)\n", len(r.Findings), len(r.Overlays), len(r.Objects))
		os.Exit(1)
	}
	fmt.Printf("deploy-check: %d overlays (%v), %d objects, %d allowed flows: all rules pass\n", len(r.Overlays), r.Overlays, len(r.Objects), len(r.Flows))
}
