package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strings"
)

// Decimal is an exact decimal number: no amount ever goes through float64.
type Decimal struct{ r big.Rat }

// decimalSyntax bounds what Decimal reads: big.Rat would accept 1e999999999
// and spend minutes and gigabytes building it.
var decimalSyntax = regexp.MustCompile(`^-?(0|[1-9][0-9]{0,29})(\.[0-9]{1,18})?([eE][+-]?[0-9])?$`)

var errNotDecimal = errors.New("expected a decimal number such as 1234.56, at most 30 digits before the point and 18 after, and an exponent of one digit")

// ParseDecimal reads s, a decimal number in JSON syntax.
func ParseDecimal(s string) (Decimal, error) {
	var d Decimal
	if !decimalSyntax.MatchString(s) {
		return d, fmt.Errorf("%q: %w", s, errNotDecimal)
	}
	if _, ok := d.r.SetString(s); !ok {
		return d, fmt.Errorf("%q: %w", s, errNotDecimal)
	}
	return d, nil
}

// String gives the shortest exact decimal form (1234.1, not 1234.10).
func (d Decimal) String() string {
	if d.r.IsInt() {
		return d.r.Num().String()
	}
	// decimalSyntax allows at most 18 places and an exponent of at most 9,
	// so 27 places plus trimming is exact.
	s := d.r.FloatString(27)
	for s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	return s
}

// RiskRequest is evaluate_transaction_risk's input.
type RiskRequest struct {
	// Amount is a json.Number so that toolkit binds it from its text, and
	// repairs a numeric string such as "15000.50" into a number: exact
	// either way.
	Amount            json.Number `json:"amount" description:"Transaction amount, an exact decimal such as 15000.50"`
	CustomerRiskScore int         `json:"customerRiskScore" tool:"minimum=0;maximum=100" description:"The customer's credit score: 100 is the most trustworthy"`
	TransactionType   string      `json:"transactionType" tool:"enum=wire_transfer|international|cash_deposit|online_payment|other"`
}

// RiskAssessment is evaluate_transaction_risk's output.
type RiskAssessment struct {
	RiskScore            float64 `json:"riskScore" description:"The weighted risk, rounded to one decimal"`
	RiskLevel            string  `json:"riskLevel" tool:"enum=LOW|MEDIUM|HIGH"`
	ManualReviewRequired bool    `json:"manualReviewRequired"`
	Recommendation       string  `json:"recommendation"`
}

// transactionRisk is the seed's table, in the order the issue lists the
// types; anything else is "other".
var transactionRisk = map[string]int64{
	"wire_transfer":  8,
	"international":  7,
	"cash_deposit":   6,
	"online_payment": 5,
	"other":          3,
}

var errNegativeAmount = errors.New("amount must not be negative")

// assessRisk is the seed's formula, computed exactly:
//
//	amountRisk      = amount / 10000 * 10
//	customerRisk    = (100 - score) / 10
//	base            = 0.4·amountRisk + 0.4·customerRisk + 0.2·transactionRisk
//	riskScore       = base rounded half up to one decimal
//	riskLevel       = HIGH if base ≥ 80, MEDIUM if base ≥ 50, else LOW
//	manual review   = base ≥ 70, or amount > 10000 and score > 60
func assessRisk(amount Decimal, score int, txType string) (RiskAssessment, error) {
	if amount.r.Sign() < 0 {
		return RiskAssessment{}, errNegativeAmount
	}
	if score < 0 || score > 100 {
		return RiskAssessment{}, fmt.Errorf("customerRiskScore %d is outside 0..100", score)
	}
	tr, ok := transactionRisk[txType]
	if !ok {
		tr = transactionRisk["other"]
	}
	rat := func(a, b int64) *big.Rat { return big.NewRat(a, b) }
	mul := func(x, y *big.Rat) *big.Rat { return new(big.Rat).Mul(x, y) }

	amountRisk := mul(&amount.r, rat(10, 10000))
	customerRisk := rat(int64(100-score), 10)
	base := new(big.Rat).Add(mul(rat(4, 10), amountRisk), mul(rat(4, 10), customerRisk))
	base.Add(base, mul(rat(2, 10), rat(tr, 1)))

	level, rec := "LOW", "Proceed with standard monitoring"
	switch {
	case base.Cmp(rat(80, 1)) >= 0:
		level, rec = "HIGH", "Block transaction and require senior manager approval"
	case base.Cmp(rat(50, 1)) >= 0:
		level, rec = "MEDIUM", "Proceed with enhanced monitoring"
	}
	review := base.Cmp(rat(70, 1)) >= 0 || (amount.r.Cmp(rat(10000, 1)) > 0 && score > 60)

	// Round half up to tenths: floor(base·10 + 1/2) / 10. base is never
	// negative, so half up and half away from zero agree.
	x := mul(base, rat(10, 1))
	x.Add(x, rat(1, 2))
	tenths := new(big.Int).Quo(x.Num(), x.Denom())
	score10, _ := new(big.Rat).SetFrac(tenths, big.NewInt(10)).Float64()

	return RiskAssessment{
		RiskScore:            score10,
		RiskLevel:            level,
		ManualReviewRequired: review,
		Recommendation:       rec,
	}, nil
}

// evaluateTransactionRisk is the evaluate_transaction_risk tool.
func evaluateTransactionRisk(_ context.Context, in RiskRequest) (RiskAssessment, error) {
	amount, err := ParseDecimal(strings.TrimSpace(string(in.Amount)))
	if err != nil {
		return RiskAssessment{}, fmt.Errorf("amount: %w", err)
	}
	return assessRisk(amount, in.CustomerRiskScore, in.TransactionType)
}
