package config

import "github.com/contractd/contractd/contracts"

func contractsData() contracts.TemplateData { return contracts.TemplateData{} }

func exampleData(r *Route) contracts.TemplateData {
	return contracts.TemplateData{Input: r.Prompt.ExampleInput}
}
