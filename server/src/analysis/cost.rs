//! What wasted CPU costs: core-hours, energy and money, from a cost model an admin sets.

use serde::{Deserialize, Serialize};

/// How host CPU turns into energy and money.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CostModel {
    /// Extra power a fully busy host core draws, in watts. A two-socket server of 2024 draws
    /// roughly 5-10 W more per busy core than idle; 7 W is the default.
    pub watts_per_busy_core: f64,
    /// Price of a kWh, in `currency`.
    pub price_per_kwh: f64,
    pub currency: String,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            watts_per_busy_core: 7.0,
            price_per_kwh: 0.25,
            currency: "EUR".into(),
        }
    }
}

const HOURS_PER_DAY: f64 = 24.0;
const DAYS_PER_MONTH: f64 = 30.0;
const HOURS_PER_YEAR: f64 = 8760.0;

/// Waste expressed in the units an admin budgets in.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Cost {
    /// Host cores busy for nothing, now.
    pub cores: f64,
    pub core_hours_per_day: f64,
    pub core_hours_per_month: f64,
    pub kwh_per_year: f64,
    /// In the model's currency.
    pub money_per_year: f64,
}

/// The yearly cost of a waste that goes on as it is now, in % of one core.
pub fn of_waste(wasted_cpu_pct: f64, model: &CostModel) -> Cost {
    let cores = (wasted_cpu_pct / 100.0).max(0.0);
    let kwh_per_year = cores * model.watts_per_busy_core * HOURS_PER_YEAR / 1000.0;
    Cost {
        cores,
        core_hours_per_day: cores * HOURS_PER_DAY,
        core_hours_per_month: cores * HOURS_PER_DAY * DAYS_PER_MONTH,
        kwh_per_year,
        money_per_year: kwh_per_year * model.price_per_kwh,
    }
}

/// Energy and money of core-hours already wasted: (kWh, money).
pub fn of_core_hours(core_hours: f64, model: &CostModel) -> (f64, f64) {
    let kwh = core_hours.max(0.0) * model.watts_per_busy_core / 1000.0;
    (kwh, kwh * model.price_per_kwh)
}

/// Money a year of a change in host CPU (% of one core), signed: a change that costs more CPU
/// costs money.
pub fn money_per_year(cpu_pct: f64, model: &CostModel) -> f64 {
    cpu_pct / 100.0 * model.watts_per_busy_core * HOURS_PER_YEAR / 1000.0 * model.price_per_kwh
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_hours_already_wasted_in_energy_and_money() {
        let model = CostModel::default();
        // 10 core-hours at 7 W a core: 0.07 kWh, at 0.25 a kWh.
        let (kwh, money) = of_core_hours(10.0, &model);
        assert!((kwh - 0.07).abs() < 1e-12 && (money - 0.0175).abs() < 1e-12);
        assert_eq!(of_core_hours(-1.0, &model), (0.0, 0.0));
    }

    #[test]
    fn waste_in_cores_hours_energy_and_money() {
        let model = CostModel::default();
        // (waste % of a core, core-hours/day, kWh/year, money/year)
        let cases = [
            (100.0, 24.0, 61.32, 15.33),
            (5.0, 1.2, 3.066, 0.7665),
            (0.0, 0.0, 0.0, 0.0),
            (-3.0, 0.0, 0.0, 0.0),
        ];
        for (pct, hours, kwh, money) in cases {
            let c = of_waste(pct, &model);
            assert!((c.core_hours_per_day - hours).abs() < 1e-9, "{pct}: {c:?}");
            assert!(
                (c.core_hours_per_month - hours * 30.0).abs() < 1e-9,
                "{pct}: {c:?}"
            );
            assert!((c.kwh_per_year - kwh).abs() < 1e-9, "{pct}: {c:?}");
            assert!((c.money_per_year - money).abs() < 1e-9, "{pct}: {c:?}");
        }
        let dear = CostModel {
            watts_per_busy_core: 10.0,
            price_per_kwh: 0.40,
            currency: "USD".into(),
        };
        assert!((of_waste(100.0, &dear).money_per_year - 35.04).abs() < 1e-9);
        // A saving can be negative; its money is too.
        assert!((money_per_year(-100.0, &dear) + 35.04).abs() < 1e-9);
        assert!((money_per_year(5.0, &model) - 0.7665).abs() < 1e-9);
    }
}
