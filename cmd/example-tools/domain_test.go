package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestLookupWeatherNormalisesCityNames(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"北京", "北京"},
		{"北京市", "北京"},
		{" 北京市 ", "北京"},
		{"Beijing", "北京"},
		{"beijing city", "北京"},
		{"Xi'an", "西安"},
		{"xi’an", "西安"},
		{"XIAN", "西安"},
		{"西安", "西安"},
		{"西安市", "西安"},
		{"Harbin", "哈尔滨"},
	} {
		got, err := lookupWeather(tc.in)
		if err != nil {
			t.Errorf("lookupWeather(%q): %v", tc.in, err)
			continue
		}
		if got.City != tc.want {
			t.Errorf("lookupWeather(%q).City = %q, want %q", tc.in, got.City, tc.want)
		}
	}
}

func TestLookupWeatherWritesTemperaturesInWords(t *testing.T) {
	for city, want := range map[string]string{
		"北京":     "25 degrees Celsius",
		"Harbin": "minus 12 degrees Celsius",
	} {
		w, err := lookupWeather(city)
		if err != nil {
			t.Fatal(err)
		}
		if w.Temperature != want {
			t.Errorf("%s: temperature %q, want %q", city, w.Temperature, want)
		}
		if strings.ContainsAny(w.Temperature+w.Humidity, "°%") {
			t.Errorf("%s: symbols in %+v", city, w)
		}
	}
	if got := celsiusWords(1); got != "1 degree Celsius" {
		t.Errorf("celsiusWords(1) = %q", got)
	}
}

func TestLookupWeatherUnknownCityListsKnownOnes(t *testing.T) {
	for _, city := range []string{"Paris", "", "市", "北京省"} {
		_, err := lookupWeather(city)
		var unknown *ErrUnknownCity
		if !errors.As(err, &unknown) {
			t.Fatalf("lookupWeather(%q) = %v, want *ErrUnknownCity", city, err)
		}
		for _, known := range []string{"北京 (Beijing)", "西安 (Xi'an)", "上海 (Shanghai)"} {
			if !strings.Contains(err.Error(), known) {
				t.Errorf("error %q does not list %s", err, known)
			}
		}
	}
}

func decimal(t *testing.T, s string) Decimal {
	t.Helper()
	d, err := ParseDecimal(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestAssessRiskFollowsTheSeedFormula(t *testing.T) {
	for _, tc := range []struct {
		amount string
		score  int
		typ    string
		want   RiskAssessment
	}{
		// 0.4·5 + 0.4·5 + 0.2·8 = 5.6
		{"5000", 50, "wire_transfer", RiskAssessment{5.6, "LOW", false, "Proceed with standard monitoring"}},
		// 0.4·15 + 0.4·3 + 0.2·7 = 8.6; amount > 10000 and score > 60 → review
		{"15000", 70, "international", RiskAssessment{8.6, "LOW", true, "Proceed with standard monitoring"}},
		// exactly 10000 is not "over 10000": 0.4·10 + 0.4·2 + 0.2·5 = 5.8
		{"10000.00", 80, "online_payment", RiskAssessment{5.8, "LOW", false, "Proceed with standard monitoring"}},
		// 0.4·120 + 0.4·5 + 0.2·6 = 51.2
		{"120000", 50, "cash_deposit", RiskAssessment{51.2, "MEDIUM", false, "Proceed with enhanced monitoring"}},
		// 0.4·170 + 0.4·5 + 0.2·3 = 70.6 → review at ≥ 70
		{"170000", 50, "other", RiskAssessment{70.6, "MEDIUM", true, "Proceed with enhanced monitoring"}},
		// 0.4·190 + 0.4·10 + 0.2·8 = 81.6
		{"190000", 0, "wire_transfer", RiskAssessment{81.6, "HIGH", true, "Block transaction and require senior manager approval"}},
		// base exactly 80: 0.4·x + 0.4·0 + 0.2·5 = 80 → x = 197.5 → amount 197500
		{"197500", 100, "online_payment", RiskAssessment{80, "HIGH", true, "Block transaction and require senior manager approval"}},
		// an unknown type weighs as other; 0.4·0.0123 + 0 + 0.6 = 0.60492 → 0.6
		{"12.3", 100, "barter", RiskAssessment{0.6, "LOW", false, "Proceed with standard monitoring"}},
		// half up: 0.4·0.125 + 0.4·0 + 0.6 = 0.65 → 0.7
		{"125", 100, "other", RiskAssessment{0.7, "LOW", false, "Proceed with standard monitoring"}},
	} {
		got, err := assessRisk(decimal(t, tc.amount), tc.score, tc.typ)
		if err != nil {
			t.Fatalf("%s/%d/%s: %v", tc.amount, tc.score, tc.typ, err)
		}
		if got != tc.want {
			t.Errorf("%s/%d/%s = %+v, want %+v", tc.amount, tc.score, tc.typ, got, tc.want)
		}
	}
}

func TestAssessRiskIsExactWhereFloatIsNot(t *testing.T) {
	// In float64, 0.4·(x/1000) for x = 124.999999999999999 is 0.05, so the
	// score rounds up; exactly, base is just under 0.65 and rounds down.
	got, err := assessRisk(decimal(t, "124.999999999999999"), 100, "other")
	if err != nil {
		t.Fatal(err)
	}
	if got.RiskScore != 0.6 {
		t.Errorf("riskScore = %v, want 0.6", got.RiskScore)
	}
}

func TestAssessRiskRejectsBadInput(t *testing.T) {
	if _, err := assessRisk(decimal(t, "-1"), 50, "other"); !errors.Is(err, errNegativeAmount) {
		t.Errorf("negative amount: %v", err)
	}
	if _, err := assessRisk(decimal(t, "1"), 101, "other"); err == nil {
		t.Error("score 101 accepted")
	}
}

func TestParseDecimalIsExactAndBounded(t *testing.T) {
	for in, want := range map[string]string{
		`1234.10`:     "1234.1",
		`1.23410e3`:   "1234.1",
		`42`:          "42",
		`0.000000001`: "0.000000001",
		`-7.5`:        "-7.5",
	} {
		d, err := ParseDecimal(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if d.String() != want {
			t.Errorf("%s read as %s, want %s", in, d, want)
		}
	}
	for _, in := range []string{`abc`, `1e999999999`, `true`, `1,5`, `0x10`, `NaN`, ``, strings.Repeat("9", 31)} {
		if d, err := ParseDecimal(in); err == nil {
			t.Errorf("%q accepted as %s", in, d)
		}
	}
}

func TestEvaluateTransactionRiskReadsTheAmountExactly(t *testing.T) {
	got, err := evaluateTransactionRisk(context.Background(), RiskRequest{Amount: json.Number("15000.00"), CustomerRiskScore: 70, TransactionType: "international"})
	if err != nil || got.RiskScore != 8.6 || !got.ManualReviewRequired {
		t.Errorf("got %+v, %v", got, err)
	}
	if _, err := evaluateTransactionRisk(context.Background(), RiskRequest{Amount: json.Number("1e999999999")}); err == nil {
		t.Error("an unbounded amount was accepted")
	}
}

func TestQueryCustomerFindsChanglu(t *testing.T) {
	got, err := queryCustomer(context.Background(), CustomerQuery{Name: "changlu"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Total != 1 || len(got.Customers) != 1 || got.Customers[0].Name != "Changlu" {
		t.Fatalf("got %+v", got)
	}
	// "chang" matches Changlu and Chang Wei; the limit cuts the list, not the total.
	got, err = queryCustomer(context.Background(), CustomerQuery{Name: "Chang", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got.Total != 2 || len(got.Customers) != 1 {
		t.Fatalf("got %+v", got)
	}
	if _, err := queryCustomer(context.Background(), CustomerQuery{Name: "x", Limit: 101}); err == nil {
		t.Error("limit 101 accepted")
	}
	got, _ = queryCustomer(context.Background(), CustomerQuery{Name: "nobody"})
	if got.Total != 0 || got.Customers == nil {
		t.Errorf("no match: %+v (customers must be [] not null)", got)
	}
}

func TestSearchOrdersFiltersByStatusAndEveryTag(t *testing.T) {
	ids := func(l OrderList) (s []string) {
		for _, o := range l.Orders {
			s = append(s, o.ID)
		}
		return s
	}
	got, _ := searchOrders(context.Background(), OrderSearch{Status: "paid"})
	if strings.Join(ids(got), ",") != "O-5001,O-5004" {
		t.Errorf("paid: %v", ids(got))
	}
	got, _ = searchOrders(context.Background(), OrderSearch{Status: "created", Tags: []string{"PRIORITY", "fragile"}})
	if strings.Join(ids(got), ",") != "O-5006" {
		t.Errorf("created+priority+fragile: %v", ids(got))
	}
	got, _ = searchOrders(context.Background(), OrderSearch{Status: "shipped", Tags: []string{"none"}})
	if got.Orders == nil || len(got.Orders) != 0 {
		t.Errorf("no match: %+v", got)
	}
}

func TestHelpdeskCreatesNumberedTicketsAndBoundsThem(t *testing.T) {
	at := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	h := &Helpdesk{now: func() time.Time { return at }}
	tk, err := h.CreateTicket(context.Background(), TicketRequest{Title: "  Printer on fire ", Priority: "high"})
	if err != nil {
		t.Fatal(err)
	}
	want := Ticket{ID: "T-00001", Title: "Printer on fire", Priority: "high", Status: "open", CreatedAt: at}
	if tk != want {
		t.Errorf("got %+v, want %+v", tk, want)
	}
	if _, err := h.CreateTicket(context.Background(), TicketRequest{Title: " ", Priority: "low"}); err == nil {
		t.Error("blank title accepted")
	}
	for range maxTickets + 5 {
		if _, err := h.CreateTicket(context.Background(), TicketRequest{Title: "t", Priority: "low"}); err != nil {
			t.Fatal(err)
		}
	}
	kept := h.Tickets()
	if len(kept) != maxTickets || kept[len(kept)-1].ID != "T-01006" {
		t.Errorf("kept %d tickets, last %s", len(kept), kept[len(kept)-1].ID)
	}
}
